"""Where the service's messages go: to its WebSocket clients and to the engine's event hook."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from claybot.proactive.agent import LoadedAgent
from claybot.proactive.broadcast import Broadcaster
from claybot.proactive.models import summary

EventHook = Callable[[str, Mapping[str, Any]], None]


class Notifier:
    def __init__(self, broadcaster: Broadcaster, on_event: EventHook | None) -> None:
        self._broadcaster = broadcaster
        self._on_event = on_event

    def notify(self, type: str, data: Mapping[str, Any]) -> None:
        self._broadcaster.publish(type, data)
        if self._on_event is not None and type != "agent:output":
            self._on_event(type, data)

    def agent_update(self, agent: LoadedAgent, *, running: bool) -> None:
        if not agent.deleted:
            self.notify("agent:update", summary(agent.config, agent.state, running=running))
