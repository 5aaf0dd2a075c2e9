"""Where an engine keeps its files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "CLAYBOT_HOME"
DEFAULT_HOME = "~/.claybot"
PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600
# What the engine creates is its owner's alone (the database, logs, histories).
PRIVATE_UMASK = 0o077


def resolve_home(cli_home: Path | str | None, env: Mapping[str, str] | None = None) -> Path:
    """``--home`` wins, then ``$CLAYBOT_HOME``, then ``~/.claybot``."""
    environ = os.environ if env is None else env
    chosen = cli_home or environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class HomePaths:
    home: Path

    @property
    def settings(self) -> Path:
        return self.home / "settings.json"

    @property
    def auth(self) -> Path:
        return self.home / "auth.json"

    @property
    def socket(self) -> Path:
        return self.home / "claybot.sock"

    @property
    def pid(self) -> Path:
        return self.home / "claybot.pid"

    @property
    def agents(self) -> Path:
        return self.home / "agents"

    @property
    def database(self) -> Path:
        return self.home / "claybot.db"

    @property
    def files(self) -> Path:
        return self.home / "files"

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    @property
    def received(self) -> Path:
        """``received/<agent id>/``: copies of the files each agent's messages carried,
        readable by that agent alone (``claybot.permissions.protected``)."""
        return self.home / "received"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def plugins(self) -> Path:
        return self.home / "plugins"

    @property
    def private_folders(self) -> tuple[Path, ...]:
        """The folders ``ensure`` makes, 0700 (the home itself aside)."""
        return (self.agents, self.files, self.workspace, self.received, self.logs, self.plugins)

    @property
    def private_files(self) -> tuple[Path, ...]:
        """The files ``ensure`` tightens to 0600 when they exist."""
        return (
            self.settings,  # a user may have written it by hand
            self.auth,
            self.database,
            self.home / "claybot.db-wal",
            self.home / "claybot.db-shm",
            self.logs / "engine.log",
            self.agents / "inbox.wal",
            self.agents / "index.jsonl",
        )

    def ensure(self) -> None:
        """Create the home and its folders, the owner's alone: folders 0700, files 0600.

        Homes made by earlier versions (0755 folders, 0644 logs and database) are
        tightened here; what lies inside a 0700 folder is out of others' reach anyway.
        """
        self.home.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, PRIVATE_FOLDER)
        for folder in self.private_folders:
            folder.mkdir(exist_ok=True)
            os.chmod(folder, PRIVATE_FOLDER)
        for file in self.private_files:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(file, PRIVATE_FILE)
