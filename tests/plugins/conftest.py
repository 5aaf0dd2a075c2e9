"""A plugin manager on a temporary home, with the test plugins and the built-in ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.config.store import ConfigStore
from claybot.connectors.base import InboundMessage, PostedMessage
from claybot.kernel.events import EventBus
from claybot.plugins import PluginCatalog, PluginManager, Registries
from claybot.plugins.builtin.clock import clock_definition
from tests.plugins.fakes import (
    Calls,
    EchoPlugin,
    broken_definition,
    echo_definition,
    solo_definition,
)

# Winter, so Europe/Paris is UTC+01:00.
NOW = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)


@dataclass
class Harness:
    home: HomePaths
    config: ConfigStore
    events: EventBus
    registries: Registries
    catalog: PluginCatalog
    calls: Calls
    echoes: dict[str, EchoPlugin]
    posted: list[InboundMessage] = field(default_factory=list)

    async def post_message(self, message: InboundMessage) -> PostedMessage:
        self.posted.append(message)
        return PostedMessage(
            agent_id=f"agent-{message.connector}",
            message_id=f"m{len(self.posted)}",
            duplicate=False,
        )

    def manager(self, **options: Any) -> PluginManager:
        return PluginManager(
            self.catalog,
            self.registries,
            self.config,
            self.events,
            self.home,
            self.post_message,
            now=lambda: NOW,
            **options,
        )

    def events_of(self, type: str) -> list[dict[str, Any]]:
        return [event.payload for event in self.events.recent(1000) if event.type == type]

    def settings_json(self) -> dict[str, Any] | None:
        if not self.home.settings.exists():
            return None
        data: dict[str, Any] = json.loads(self.home.settings.read_text())
        return data

    def write_settings_json(self, data: dict[str, Any]) -> None:
        self.home.home.mkdir(parents=True, exist_ok=True)
        self.home.settings.write_text(json.dumps(data))


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    home = HomePaths(tmp_path / "home")
    home.ensure()
    calls = Calls()
    echoes: dict[str, EchoPlugin] = {}
    catalog = PluginCatalog(
        [
            clock_definition(now=lambda: NOW),
            echo_definition(calls, echoes),
            broken_definition(calls),
            solo_definition(),
        ]
    )
    return Harness(
        home=home,
        config=ConfigStore(home),
        events=EventBus(first_id=1),
        registries=Registries(),
        catalog=catalog,
        calls=calls,
        echoes=echoes,
    )
