"""What a sandboxed command may see, and the argv that enforces it. Pure: no I/O.

Two backends run ``/bin/sh -c <command>``:

- ``bwrap`` (bubblewrap): new namespaces for everything (so no network unless the
  agent holds ``@network``), the root file system read-only, a fresh ``/proc``,
  ``/dev`` and ``/tmp``, the ClayBot home blanked, the agent's grants bound back
  (``writeDirs`` read-write) and secrets covered whatever the grants say.
- ``rlimit``: a plain child with resource limits; without ``@network`` it runs
  in a new network namespace through ``unshare``, and when no way to make one
  works it refuses to run (fail closed). It confines nothing on the file system.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from claybot.engine.permissions.tags import is_within

SandboxMode = Literal["auto", "bwrap", "rlimit"]
Backend = Literal["bwrap", "rlimit"]

SHELL = "/bin/sh"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Only these cross into the sandbox (HOME is set by us): no tokens, no keys.
SAFE_ENVIRONMENT = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM")

# ``unshare`` flag sets tried in order to give a command an empty network namespace:
# as root a plain new namespace, otherwise one inside a new user namespace.
NETWORK_ISOLATIONS: tuple[tuple[str, ...], ...] = (("--net",), ("--map-root-user", "--net"))

# Relative to each user home; hidden from every command, whatever it was granted.
SECRET_HOME_ENTRIES = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
)
SECRET_SYSTEM_PATHS = ("/etc/shadow", "/etc/gshadow", "/etc/ssh")
# Relative to the ClayBot home: credentials, settings (provider keys), the owner's
# control socket and the database holding API key hashes and jobs.
CLAYBOT_SECRET_ENTRIES = (
    "auth.json",
    "settings.json",
    "claybot.sock",
    "claybot.db",
    "claybot.db-wal",
    "claybot.db-shm",
    "claybot.db-journal",
)


class SandboxUnavailable(RuntimeError):
    """The command cannot be run with the isolation it needs; it was not started."""


@dataclass(frozen=True)
class SandboxPolicy:
    cwd: str
    network: bool
    read_dirs: tuple[str, ...] = ()  # bound read-only
    write_dirs: tuple[str, ...] = ()  # bound read-write
    # Emptied (tmpfs) *before* the grants are bound, so a grant inside shows through.
    blanked_dirs: tuple[str, ...] = ()
    # Covered *after* the grants, so no grant reveals them: tmpfs or /dev/null.
    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()


def secret_paths(user_homes: Iterable[str], claybot_home: str) -> list[str]:
    """Every path a command must never read, existing or not."""
    paths = [f"{home.rstrip('/')}/{entry}" for home in user_homes for entry in SECRET_HOME_ENTRIES]
    paths += SECRET_SYSTEM_PATHS
    paths += [f"{claybot_home.rstrip('/')}/{entry}" for entry in CLAYBOT_SECRET_ENTRIES]
    return list(dict.fromkeys(paths))


def sandbox_environment(home: str, source: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a command: safe variables from ``source`` and ``HOME``."""
    env = {name: source[name] for name in SAFE_ENVIRONMENT if name in source}
    env.setdefault("PATH", DEFAULT_PATH)
    env["HOME"] = home
    return env


def _depth_order(paths: Iterable[str]) -> list[str]:
    # Parents before children: a later mount inside an earlier one refines it.
    return sorted(dict.fromkeys(paths), key=lambda path: (path.count("/"), path))


def bwrap_argv(bwrap: str, command: str, policy: SandboxPolicy) -> list[str]:
    argv = [bwrap, "--unshare-all"]
    if policy.network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--tmpfs", "/tmp"]
    for directory in _depth_order(policy.blanked_dirs):
        argv += ["--tmpfs", directory]
    for directory in _depth_order(policy.read_dirs):
        if not any(is_within(directory, writable) for writable in policy.write_dirs):
            argv += ["--ro-bind-try", directory, directory]
    for directory in _depth_order(policy.write_dirs):
        argv += ["--bind-try", directory, directory]
    for directory in _depth_order(policy.hidden_dirs):
        argv += ["--tmpfs", directory]
    for path in _depth_order(policy.hidden_files):
        argv += ["--ro-bind", "/dev/null", path]
    # Last, so that no grant (even of "/") brings back the host's /proc or /dev.
    argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", policy.cwd]
    return [*argv, "--", SHELL, "-c", command]


def rlimit_argv(command: str, network: bool, isolation: Sequence[str] | None) -> list[str]:
    """``isolation``: the argv prefix that gives a new network namespace, None if none works."""
    if network:
        return [SHELL, "-c", command]
    if isolation is None:
        raise SandboxUnavailable(
            "this command needs network isolation (the agent lacks @network), and neither "
            "bubblewrap nor `unshare --net`/`unshare -rn` works here, so it was not run; "
            "install bubblewrap, enable user namespaces, or grant @network"
        )
    return [*isolation, SHELL, "-c", command]
