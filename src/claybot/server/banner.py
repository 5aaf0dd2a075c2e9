"""What ``claybot start`` prints once the engine serves: where it listens, what next.

One function for both ways of starting: in the foreground the engine prints it
itself; with ``--detach`` the command that waited prints it from the engine's status.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claybot.config.home import resolve_home


@dataclass(frozen=True)
class ReadyEngine:
    pid: int
    socket: str
    http: str
    home: str
    exec_summary: str

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> ReadyEngine:
        """From ``GET /v1/engine/status``."""
        tcp = status.get("tcp") or {}
        sandbox = status.get("sandbox") or {}
        return cls(
            pid=int(status["pid"]),
            socket=str(status.get("socketPath")),
            http=f"http://{tcp.get('host')}:{tcp.get('port')}",
            home=str(status.get("home")),
            exec_summary=str(sandbox.get("summary")),
        )


def ready_banner(engine: ReadyEngine, *, detached: bool, home_flag: str = "") -> str:
    """The lines to print; ``home_flag`` (`` --home DIR``) is added to the commands
    suggested when they would not find this home by themselves."""
    next_steps = [
        (f"claybot chat{home_flag}", "talk to an agent"),
        (f"claybot dashboard{home_flag}", "open the dashboard (a one-time login link)"),
        (f"claybot doctor{home_flag}", "check what this machine and home are missing"),
        (f"claybot stop{home_flag}" if detached else "Ctrl-C", "stop the engine"),
    ]
    width = max(len(command) for command, _ in next_steps) + 3
    return "\n".join(
        [
            f"ClayBot engine ready (pid {engine.pid})",
            f"  socket: {engine.socket}",
            # The API there needs a key; the dashboard there, a login link.
            f"  http:   {engine.http} (the API, with a key: claybot keys create)",
            f"  home:   {engine.home}",
            f"  exec:   {engine.exec_summary}",
            "Next:",
            *(f"  {command:<{width}}{what}" for command, what in next_steps),
        ]
    )


def home_flag(home: Path, environ: Mapping[str, str]) -> str:
    """`` --home DIR`` when a command run with ``environ`` would pick another home."""
    if resolve_home(None, environ) == home:
        return ""
    return f" --home {shlex.quote(str(home))}"
