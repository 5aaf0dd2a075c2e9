"""The text of the service that runs ``claybot start``: a systemd user unit, a launchd plist.

Pure: given the command and the home, the file's bytes (and back: the home a file
serves). Where the file goes and what runs it is ``service_cmds``.

How the engine behaves decides the settings, not habit:
- ``Type=notify``: the engine sends ``READY=1`` once its socket answers and its
  sandbox is probed (``kernel/service_notify``), so ``systemctl --user start``
  returns when the engine really serves, and a start that fails is a failed unit.
- SIGTERM is the engine's graceful stop: connectors stop taking messages, running
  turns get ``DRAIN_TIMEOUT_S`` (10 s, ``server/serve.py``) to finish or stay durably
  queued, then files are flushed. ``claybot stop`` waits ``STOP_WAIT_S`` (20 s) for
  it; systemd waits longer before SIGKILL. ``KillMode=mixed`` sends SIGTERM to the
  engine alone, which stops what it started itself (sandboxed commands, MCP
  servers) in order; systemd kills whatever is left once the engine has exited.
- ``Restart=on-failure``: a crash (or SIGKILL) restarts it; ``claybot stop`` exits 0
  and is respected. A home that cannot start at all (an invalid settings.json, the
  port taken) stops being retried after ``START_LIMIT_BURST`` tries, so
  ``claybot service status`` shows "failed" rather than a restart loop.
"""

from __future__ import annotations

import os
import plistlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UNIT_NAME = "claybot.service"
LAUNCHD_LABEL = "dev.claybot.engine"
RESTART_DELAY_S = 5
STOP_TIMEOUT_S = 30  # > STOP_WAIT_S (20 s, `claybot stop`) > DRAIN_TIMEOUT_S (10 s)
START_TIMEOUT_S = 120  # first boot of a large home reads every agent and cron task
START_LIMIT_INTERVAL_S = 300
START_LIMIT_BURST = 5
HOME_COMMENT = "# ClayBot home: "


# What decides which ClayBot ``python -m claybot`` imports: passed on to the service,
# so it runs the code the installing command ran (a checkout on PYTHONPATH included).
INHERITED_VARIABLES = ("PYTHONPATH",)


@dataclass(frozen=True)
class ServiceSpec:
    """What the service runs: ``argv`` (absolute executable first) for ``home``, with
    ``environment`` set."""

    argv: tuple[str, ...]
    home: Path
    environment: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.argv or not Path(self.argv[0]).is_absolute():
            raise ValueError(f"the service needs an absolute executable, not {self.argv[:1]!r}")
        words = [*self.argv, str(self.home), *(f"{k}={v}" for k, v in self.environment)]
        for word in words:
            if any(ord(char) < 0x20 or char == "\x7f" for char in word):
                raise ValueError(f"a control character in {word!r} cannot go into a unit file")


def engine_spec(python: str, home: Path, environ: Mapping[str, str], cwd: Path) -> ServiceSpec:
    """``python -m claybot start --home HOME``: the interpreter of the install that wrote
    the file, so the service runs the same ClayBot whatever the service's PATH is.

    A relative PYTHONPATH entry is made absolute from ``cwd``: the service starts
    elsewhere, and would otherwise import another ClayBot (or none).
    """
    environment = tuple(
        (name, os.pathsep.join(str(cwd / entry) for entry in environ[name].split(os.pathsep)))
        for name in INHERITED_VARIABLES
        if environ.get(name)
    )
    return ServiceSpec((python, "-m", "claybot", "start", "--home", str(home)), home, environment)


def systemd_escape(value: str) -> str:
    """One word of a command line as systemd reads it.

    systemd expands ``%`` specifiers and ``$VAR`` in ExecStart, unquotes, and undoes
    C escapes: each is written doubled or escaped, and a word with a blank or a quote
    is quoted, so a home such as ``/srv/my bots/100%`` arrives unchanged.
    """
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    if escaped and not any(char.isspace() or char in "\"';" for char in value):
        return escaped
    return f'"{escaped}"'


def systemd_environment(name: str, value: str) -> str:
    """An ``Environment=`` line: unquoted and unescaped like ExecStart, % specifiers
    expanded, but ``$`` taken as it is."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'Environment="{name}={escaped}"'


def systemd_unit(spec: ServiceSpec) -> str:
    command = " ".join(systemd_escape(part) for part in spec.argv)
    environment = "".join(
        systemd_environment(name, value) + "\n" for name, value in spec.environment
    )
    home = str(spec.home)
    return f"""\
# Written by `claybot service install`; `claybot service uninstall` removes it.
{HOME_COMMENT}{home}
[Unit]
Description=ClayBot agent engine ({home.replace("%", "%%")})
StartLimitIntervalSec={START_LIMIT_INTERVAL_S}
StartLimitBurst={START_LIMIT_BURST}

[Service]
Type=notify
NotifyAccess=main
{environment}ExecStart={command}
Restart=on-failure
RestartSec={RESTART_DELAY_S}
TimeoutStartSec={START_TIMEOUT_S}
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec={STOP_TIMEOUT_S}

[Install]
WantedBy=default.target
"""


def home_of_unit(text: str) -> Path | None:
    """The home a unit written by ``systemd_unit`` serves (None for any other file)."""
    for line in text.splitlines():
        if line.startswith(HOME_COMMENT):
            return Path(line[len(HOME_COMMENT) :])
    return None


def launchd_plist(spec: ServiceSpec, output: Path) -> bytes:
    """A LaunchAgent: started at login, restarted when it exits with an error.

    launchd has no readiness protocol; ``KeepAlive.SuccessfulExit = false`` is
    systemd's ``Restart=on-failure``, ``ExitTimeOut`` its ``TimeoutStopSec`` (launchd
    sends SIGTERM, then SIGKILL after it), ``ThrottleInterval`` its ``RestartSec``.
    """
    document: dict[str, Any] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(spec.argv),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": RESTART_DELAY_S,
        "ExitTimeOut": STOP_TIMEOUT_S,
        "WorkingDirectory": str(spec.home),
        "EnvironmentVariables": dict(spec.environment),
        "StandardOutPath": str(output),
        "StandardErrorPath": str(output),
    }
    return plistlib.dumps(document)


def home_of_plist(data: bytes) -> Path | None:
    """The home a plist written by ``launchd_plist`` serves (None for any other file)."""
    try:
        document = plistlib.loads(data)
    except Exception:  # plistlib raises several types for a damaged file
        return None
    argv = document.get("ProgramArguments") if isinstance(document, dict) else None
    if not isinstance(argv, list) or "--home" not in argv[:-1]:
        return None
    return Path(str(argv[argv.index("--home") + 1]))


def shell_command(argv: list[str]) -> str:
    """A command as the user would type it, for "run this" messages."""
    return shlex.join(argv)
