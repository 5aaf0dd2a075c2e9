"""The service managers that can run the engine for a user: systemd (Linux), launchd (macOS).

Each says where its file goes, whether it can be reached from here, how to start
and stop the service, and what state it is in, by running its own command line
(``systemctl --user``, ``launchctl``). A container, or a shell with no session bus,
has no user manager: then ``unreachable()`` says why, and the commands to run
where one exists are shown instead of run.
"""

from __future__ import annotations

import enum
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from claybot.cli.service_unit import (
    LAUNCHD_LABEL,
    UNIT_NAME,
    ServiceSpec,
    home_of_plist,
    home_of_unit,
    launchd_plist,
    shell_command,
    systemd_unit,
)

# `systemctl --user enable --now` waits for READY=1, up to the unit's TimeoutStartSec.
COMMAND_TIMEOUT_S = 180.0


class ManagerKind(enum.StrEnum):
    systemd = "systemd"
    launchd = "launchd"


def default_kind(platform: str = sys.platform) -> ManagerKind:
    return ManagerKind.launchd if platform == "darwin" else ManagerKind.systemd


class ServiceCommandFailed(RuntimeError):
    def __init__(self, argv: list[str], output: str) -> None:
        super().__init__(f"`{shell_command(argv)}` failed: {output.strip() or 'no output'}")


@dataclass(frozen=True)
class ServiceState:
    enabled: str  # "enabled", "disabled", ... or "unknown"
    active: str  # "active", "inactive", "failed", ... or "unknown"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def _check(argv: list[str]) -> str:
    result = _run(argv)
    if result.returncode != 0:
        raise ServiceCommandFailed(argv, result.stderr or result.stdout)
    return result.stdout


class ServiceManager(Protocol):
    kind: ManagerKind
    what: str  # "systemd user unit", for messages

    @property
    def path(self) -> Path: ...

    def render(self, spec: ServiceSpec, output: Path) -> bytes: ...

    def home_of(self, data: bytes) -> Path | None: ...

    def unreachable(self) -> str | None:
        """Why the manager cannot be used from here, or None when it can."""

    def start_commands(self) -> list[list[str]]:
        """What starts the installed service (shown when it cannot be run from here)."""

    def activate(self, restart: bool) -> None:
        """Load the file, enable the service at login and start it (``restart``: again,
        so that a changed file takes effect)."""

    def deactivate(self, reachable: bool) -> None:
        """Stop the service (where the manager is ``reachable``) and disable it; one that
        is not loaded is no error."""

    def forget(self) -> None:
        """After the file is removed: make the manager forget it."""

    def state(self, reachable: bool) -> ServiceState: ...

    def notes(self) -> list[str]:
        """What the user should know about how this manager runs it (linger...)."""


class SystemdUser:
    kind = ManagerKind.systemd
    what = "systemd user unit"

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.systemctl = shutil.which("systemctl", path=environ.get("PATH", os.defpath))

    @property
    def path(self) -> Path:
        # Where `systemctl --user` looks first; a relative XDG_CONFIG_HOME is invalid
        # (XDG base directory spec) and ignored, as systemd does.
        config = self.environ.get("XDG_CONFIG_HOME", "")
        if not os.path.isabs(config):
            config = os.path.join(self.environ.get("HOME") or str(Path.home()), ".config")
        return Path(config) / "systemd" / "user" / UNIT_NAME

    def render(self, spec: ServiceSpec, output: Path) -> bytes:
        return systemd_unit(spec).encode()

    def home_of(self, data: bytes) -> Path | None:
        return home_of_unit(data.decode(errors="replace"))

    def _systemctl(self, *args: str) -> list[str]:
        return [self.systemctl or "systemctl", "--user", *args]

    def unreachable(self) -> str | None:
        if self.systemctl is None:
            return "systemctl is not installed"
        result = _run(self._systemctl("show", "--property=Version"))
        if result.returncode == 0:
            return None
        reason = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        if not Path("/run/systemd/system").exists():
            reason += "; this machine was not booted with systemd (a container?)"
        return f"systemd's user manager is not reachable ({reason})"

    def start_commands(self) -> list[list[str]]:
        return [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", UNIT_NAME],
        ]

    def activate(self, restart: bool) -> None:
        _check(self._systemctl("daemon-reload"))
        _check(self._systemctl("enable", "--now", UNIT_NAME))
        if restart:
            _check(self._systemctl("restart", UNIT_NAME))

    def deactivate(self, reachable: bool) -> None:
        # Disabling alone works with no manager: it removes the link in default.target.wants.
        argv = self._systemctl("disable", "--now", UNIT_NAME)
        if not reachable:
            argv.remove("--now")
        if self.systemctl is not None:
            _check(argv)

    def forget(self) -> None:
        _check(self._systemctl("daemon-reload"))
        _run(self._systemctl("reset-failed", UNIT_NAME))  # a failed unit stays listed otherwise

    def state(self, reachable: bool) -> ServiceState:
        if self.systemctl is None:
            return ServiceState("unknown", "unknown")
        # is-enabled reads the unit files, so it answers with no manager running.
        enabled = _run(self._systemctl("is-enabled", UNIT_NAME)).stdout.strip() or "unknown"
        active = "unknown"
        if reachable:
            active = _run(self._systemctl("is-active", UNIT_NAME)).stdout.strip() or "unknown"
        return ServiceState(enabled, active)

    def notes(self) -> list[str]:
        user = self.environ.get("USER") or self.environ.get("LOGNAME")
        if user and not Path("/var/lib/systemd/linger", user).exists():
            return [
                "a user service runs while you are logged in; to run it from boot without "
                f"a login: `loginctl enable-linger {user}`"
            ]
        return []


class Launchd:
    kind = ManagerKind.launchd
    what = "launchd agent"

    def __init__(self, environ: Mapping[str, str], platform: str = sys.platform) -> None:
        self.environ = environ
        self.platform = platform
        self.launchctl = shutil.which("launchctl", path=environ.get("PATH", os.defpath))
        self.domain = f"gui/{os.getuid()}"

    @property
    def path(self) -> Path:
        home = self.environ.get("HOME") or str(Path.home())
        return Path(home) / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"

    def render(self, spec: ServiceSpec, output: Path) -> bytes:
        return launchd_plist(spec, output)

    def home_of(self, data: bytes) -> Path | None:
        return home_of_plist(data)

    def unreachable(self) -> str | None:
        if self.platform != "darwin":
            return "launchd runs only on macOS"
        if self.launchctl is None:
            return "launchctl is not installed"
        return None

    def _launchctl(self, *args: str) -> list[str]:
        return [self.launchctl or "launchctl", *args]

    def start_commands(self) -> list[list[str]]:
        return [["launchctl", "bootstrap", self.domain, str(self.path)]]

    def _loaded(self) -> bool:
        return _run(self._launchctl("print", f"{self.domain}/{LAUNCHD_LABEL}")).returncode == 0

    def activate(self, restart: bool) -> None:
        if self._loaded():  # bootstrap refuses a loaded label: load the new file again
            if not restart:
                return
            _check(self._launchctl("bootout", f"{self.domain}/{LAUNCHD_LABEL}"))
        _check(self._launchctl("bootstrap", self.domain, str(self.path)))

    def deactivate(self, reachable: bool) -> None:
        if reachable and self._loaded():
            _check(self._launchctl("bootout", f"{self.domain}/{LAUNCHD_LABEL}"))

    def forget(self) -> None:
        return None  # bootout already unloaded it

    def state(self, reachable: bool) -> ServiceState:
        if not reachable:
            return ServiceState("unknown", "unknown")
        result = _run(self._launchctl("print", f"{self.domain}/{LAUNCHD_LABEL}"))
        if result.returncode != 0:
            return ServiceState("not loaded", "inactive")
        running = any(line.strip() == "state = running" for line in result.stdout.splitlines())
        return ServiceState("loaded", "active" if running else "inactive")

    def notes(self) -> list[str]:
        return []


def service_manager(kind: ManagerKind, environ: Mapping[str, str]) -> ServiceManager:
    if kind is ManagerKind.launchd:
        return Launchd(environ)
    return SystemdUser(environ)
