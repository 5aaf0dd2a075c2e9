"""Building the proactive service from an engine's home, settings and agents."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from claybot.agents.system import AgentSystem
from claybot.config.auth import AuthFile
from claybot.config.settings import ProactiveSettings
from claybot.kernel.clock import Clock
from claybot.kernel.events import EventBus
from claybot.proactive.engine_runner import EngineRunner
from claybot.proactive.environment import CLAUDE_AUTH_FIELDS, run_environment, withheld_secrets
from claybot.proactive.redact import Redactor
from claybot.proactive.runner import ClaudeRunner, Runner
from claybot.proactive.service import ProactiveService, ServiceLimits
from claybot.proactive.store import ProactiveStore

CLAUDE_AUTH_ENTRY = "claude"


def bus_event_type(type: str) -> str:
    """``agent:execution:start`` → ``proactive.execution.start`` on the engine's event bus."""
    return "proactive." + type.removeprefix("agent:").replace(":", ".")


def _auth_secrets(auth: AuthFile) -> list[str]:
    return [
        value
        for entry in auth.root.values()
        for value in (entry.model_extra or {}).values()
        if isinstance(value, str)
    ]


def build_proactive_service(
    *,
    home: Path,
    settings: ProactiveSettings,
    engine_timezone: str,
    env: Mapping[str, str],
    read_auth: Callable[[], AuthFile],
    agents: AgentSystem,
    events: EventBus,
    clock: Clock,
) -> ProactiveService:
    async def claude_environment() -> dict[str, str]:
        entry = (await asyncio.to_thread(read_auth)).get(CLAUDE_AUTH_ENTRY)
        credentials: dict[str, str] = {}
        for field, variable in CLAUDE_AUTH_FIELDS.items():
            value = entry.secret(field) if entry is not None else None
            if value:
                credentials[variable] = value
        return run_environment(env, credentials)

    def on_event(type: str, data: Mapping[str, Any]) -> None:
        events.emit(bus_event_type(type), data)

    runners: dict[str, Runner] = {
        "claude": ClaudeRunner(claude_environment),
        "engine": EngineRunner(agents),
    }
    workspace = home / "workspace"
    if settings.workspace:
        workspace = home / Path(settings.workspace).expanduser()  # a relative one is in the home
    return ProactiveService(
        ProactiveStore(home / "proactive"),
        runners,
        workspace=workspace,
        limits=ServiceLimits.from_settings(settings, engine_timezone),
        redactor=Redactor([*withheld_secrets(env), *_auth_secrets(read_auth())]),
        clock=clock,
        on_event=on_event,
    )
