"""What a sandboxed command may see, and the argv that enforces it. Pure: no I/O.

A command an agent (or a gate an agent made) runs is confined, or it does not run:

- ``bwrap`` (bubblewrap, the only backend ``auto`` uses): new namespaces for
  everything (so no network unless the agent holds ``@network``, and a PID
  namespace that the kernel empties when the command ends), every capability
  dropped (as root too: a capable process could unmount what hides the secrets),
  the root file system read-only, a fresh ``/proc``, ``/dev`` and ``/tmp``, the
  ClayBot home blanked, the agent's grants bound back (``writeDirs`` read-write),
  the engine's own files and every conversation's received files covered again
  whatever the grants say, and last the agent's own received files (a grant inside
  that folder) bound back read-only.
- ``unconfined``: only when the user names it in settings. A plain child with
  resource limits and, without ``@network``, an empty network namespace from
  ``unshare``; it confines nothing on the file system, which every start, the
  status and every result say.

A command's network (``NetworkMode``) is "none" (an empty namespace of its own),
"host" (the machine's, loopback and LAN included: an agent's ``@network``) or
"egress": an empty namespace of its own whose only way out is the egress proxy's
Unix socket, reached through a relay on the namespace's own loopback (see
``egress_relay``), so that the proxy's address rule decides where it goes. Without
the host's network ``/run`` is a fresh tmpfs too: it holds the machine's service
sockets (PostgreSQL's among them), which a Unix socket reaches past any namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from claybot.kernel.errors import Unavailable
from claybot.permissions.tags import is_within

SandboxMode = Literal["auto", "bwrap", "unconfined"]
Backend = Literal["bwrap", "unconfined"]
NetworkMode = Literal["none", "egress", "host"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "bwrap", "unconfined")

SHELL = "/bin/sh"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Only these cross into the sandbox (HOME is set by us): no tokens, no keys.
SAFE_ENVIRONMENT = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM")

# Where an "egress" command finds the proxy's socket under bubblewrap, in the fresh /run
# (the host's holds PostgreSQL's, Docker's and D-Bus's sockets: the local network by
# another name).
EGRESS_SOCKET = "/run/claybot-egress.sock"
RUN_DIR = "/run"

# ``unshare`` flag sets tried in order to give an unconfined command an empty network
# namespace: as root a plain new namespace, otherwise one inside a new user namespace.
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
# Relative to the ClayBot home: what is the engine's and never an agent's, however
# widely a grant reaches. Credentials and settings (provider keys), the owner's control
# socket (it can mint API keys and answer permission requests), the database, every
# agent's files (another agent's history, and one's own state.json, which holds its
# grants), the permission log, plugin and proactive state, logs, stored files and
# the cron run ledger. Task folders and the workspace stay grantable.
PROTECTED_HOME_ENTRIES = (
    "auth.json",
    "settings.json",
    "claybot.sock",
    "claybot.pid",
    "claybot.lock",
    "claybot.db",
    "claybot.db-wal",
    "claybot.db-shm",
    "claybot.db-journal",
    "agents",
    "permissions",
    "plugins",
    "proactive",
    "logs",
    "files",
    "cron/.runs.jsonl",
)
# Relative to the ClayBot home: folders of one part per agent (``received/<agent id>``:
# the files its conversation brought, copied out of the store). Covered like the
# engine's files, but an agent's own part is bound back read-only for it (see
# ``claybot.permissions.protected``).
PRIVATE_HOME_ENTRIES = ("received",)


class SandboxUnavailable(Unavailable, RuntimeError):
    """The command cannot be run with the confinement it needs; it was not started."""

    code = "sandbox_unavailable"


@dataclass(frozen=True)
class EgressRoute:
    """An "egress" command's way out: the proxy's Unix socket (a host path) and the
    argv that starts the relay; the socket's path inside, then the command, follow it."""

    socket: str
    relay: tuple[str, ...]


@dataclass(frozen=True)
class SandboxPolicy:
    cwd: str
    network: NetworkMode
    egress: EgressRoute | None = None  # with network "egress"
    read_dirs: tuple[str, ...] = ()  # bound read-only
    write_dirs: tuple[str, ...] = ()  # bound read-write
    # Emptied (tmpfs) *before* the grants are bound, so a grant inside shows through.
    blanked_dirs: tuple[str, ...] = ()
    # Covered *after* the grants, so no grant reveals them: tmpfs or /dev/null.
    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()
    # Bound read-only *after* the covers: the agent's own part of a private folder.
    private_dirs: tuple[str, ...] = ()


def secret_paths(user_homes: Iterable[str], claybot_home: str) -> list[str]:
    """Every path a command must never reach, existing or not."""
    paths = [f"{home.rstrip('/')}/{entry}" for home in user_homes for entry in SECRET_HOME_ENTRIES]
    paths += SECRET_SYSTEM_PATHS
    paths += protected_paths(claybot_home)
    return list(dict.fromkeys(paths))


def protected_paths(claybot_home: str) -> list[str]:
    """The ClayBot home's own files and folders (see ``PROTECTED_HOME_ENTRIES``)."""
    return [f"{claybot_home.rstrip('/')}/{entry}" for entry in PROTECTED_HOME_ENTRIES]


def private_paths(claybot_home: str) -> list[str]:
    """The ClayBot home's folders of one part per agent (``PRIVATE_HOME_ENTRIES``)."""
    return [f"{claybot_home.rstrip('/')}/{entry}" for entry in PRIVATE_HOME_ENTRIES]


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
    relay = _relay(policy.network, policy.egress, EGRESS_SOCKET)
    argv = [bwrap, "--unshare-all"]
    if policy.network == "host":
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--tmpfs", "/tmp"]
    if policy.network != "host":
        argv += ["--tmpfs", RUN_DIR]
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
    for directory in _depth_order(policy.private_dirs):
        argv += ["--ro-bind-try", directory, directory]
    if policy.egress is not None and relay:  # after /run's tmpfs, which holds it
        argv += ["--ro-bind", policy.egress.socket, EGRESS_SOCKET]
    # Last, so that no grant (even of "/") brings back the host's /proc or /dev.
    argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", policy.cwd]
    return [*argv, "--", *relay, SHELL, "-c", command]


def unconfined_argv(
    command: str,
    network: NetworkMode,
    isolation: Sequence[str] | None,
    egress: EgressRoute | None = None,
) -> list[str]:
    """``isolation``: the argv prefix that gives a new network namespace, None if none works."""
    relay = _relay(network, egress, egress.socket if egress else "")
    if network == "host":
        return [SHELL, "-c", command]
    if isolation is None:
        if network == "egress":
            raise SandboxUnavailable(
                "this command's network is the egress proxy, which needs an empty network "
                "namespace of its own, and neither `unshare --net` nor `unshare -rn` works "
                "here, so it was not run (it is never given the host's network instead); "
                "install bubblewrap or enable user namespaces"
            )
        raise SandboxUnavailable(
            "this command needs network isolation (the agent lacks @network), and neither "
            "`unshare --net` nor `unshare -rn` works here, so it was not run; install "
            "bubblewrap, enable user namespaces, or grant @network"
        )
    return [*isolation, *relay, SHELL, "-c", command]


def _relay(network: NetworkMode, egress: EgressRoute | None, socket: str) -> list[str]:
    """The argv that runs the command behind the egress relay, or [] without one."""
    if network != "egress":
        return []
    if egress is None:
        raise ValueError('network "egress" needs the route to the proxy')
    return [*egress.relay, socket]
