"""The home's folders exist, and nobody but its owner can read them or the secrets.

The engine makes the home 0700 and its files 0600 (``HomePaths.ensure``); a home
copied, restored from a backup or written by hand can have lost that. The home
itself, settings.json (provider options), auth.json (keys and tokens), the control
socket and the database (API key hashes, jobs) open to others is a failure; other
files and folders only a warning, since a private home already hides them.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from claybot.config.home import PRIVATE_FILE, PRIVATE_FOLDER, HomePaths
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, Repair, fail, ok, warn

# Any bit for the group or the world: even "execute" on a folder lets others in by name.
OTHERS = 0o077


def check_home(context: DoctorContext) -> list[Finding]:
    return [_folders(context.paths), _modes(context.paths)]


def _folders(paths: HomePaths) -> Finding:
    missing = [p for p in (paths.home, *paths.private_folders) if not p.is_dir()]
    if not missing:
        return ok("home.folders", f"{paths.home} and its folders exist")
    if paths.home in missing:
        return warn(
            "home.folders",
            f"the home {paths.home} does not exist yet (the engine creates it when it starts)",
            "claybot doctor --fix",
            _ensure(paths, f"created {paths.home} and its folders"),
        )

    what = ", ".join(_name(paths, p) for p in missing)
    return warn(
        "home.folders",
        f"missing: {what} (the engine creates them when it starts)",
        "claybot doctor --fix",
        _ensure(paths, f"created {what}"),
    )


def _ensure(paths: HomePaths, done: str) -> Repair:
    def create() -> str:
        paths.ensure()  # also tightens the modes, as at every start
        return done

    return create


def _modes(paths: HomePaths) -> Finding:
    # The socket is on the list: whoever reaches it can mint API keys.
    secrets = {paths.home, paths.settings, paths.auth, paths.socket, *_database_files(paths)}
    open_paths: list[tuple[Path, int]] = []
    for path in (paths.home, *paths.private_folders, *paths.private_files, paths.socket):
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            continue
        if mode & OTHERS:
            open_paths.append((path, mode))
    if not paths.home.exists():
        return ok("home.modes", "nothing to check yet: the home does not exist")
    if not open_paths:
        return ok("home.modes", "the home and its secrets are the owner's alone (0700 / 0600)")
    detail = "others can reach " + ", ".join(
        f"{_name(paths, path)} ({mode:04o})" for path, mode in open_paths
    )
    folders = [path for path, _ in open_paths if path.is_dir()]
    files = [path for path, _ in open_paths if not path.is_dir()]
    commands = []
    if folders:
        commands.append(f"chmod {PRIVATE_FOLDER:o} " + " ".join(_quoted(folders)))
    if files:
        commands.append(f"chmod {PRIVATE_FILE:o} " + " ".join(_quoted(files)))
    command = " && ".join(commands)

    def tighten() -> str:
        for path in folders:
            os.chmod(path, PRIVATE_FOLDER)
        for path in files:
            os.chmod(path, PRIVATE_FILE)
        return command

    exposed_secret = any(path in secrets for path, _ in open_paths)
    report = fail if exposed_secret else warn
    return report("home.modes", detail, command, tighten)


def _database_files(paths: HomePaths) -> list[Path]:
    return [paths.database, *(paths.home / f"claybot.db-{end}" for end in ("wal", "shm"))]


def _name(paths: HomePaths, path: Path) -> str:
    return "the home" if path == paths.home else str(path.relative_to(paths.home))


def _quoted(paths: list[Path]) -> list[str]:
    return [shlex.quote(str(path)) for path in paths]
