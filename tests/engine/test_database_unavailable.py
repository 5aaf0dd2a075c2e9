"""An unreachable database costs the TCP API its keys, not the engine its agents."""

from __future__ import annotations

import asyncio

import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.db.errors import StoreError
from claybot.engine.engine import Engine, EngineOptions
from tests.agents.test_agents import next_event, record_events
from tests.conftest import ECHO_SETTINGS, write_settings


async def test_keys_fail_clearly_while_agents_keep_working(paths: HomePaths) -> None:
    write_settings(paths, ECHO_SETTINGS)
    env = {"CLAYBOT_DATABASE_URL": "postgresql://claybot:hunter2@127.0.0.1:1/nowhere"}
    engine = Engine(paths, EngineOptions(port=0, env=env))
    events = record_events(engine)
    await engine.start()
    try:
        with pytest.raises(StoreError) as caught:
            await asyncio.wait_for(engine.keys.list(), 60)
        assert "hunter2" not in str(caught.value)
        status = engine.status()["database"]
        assert status["ready"] is False and "hunter2" not in status["error"]
        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "still here"))
        await next_event(events, "agent.outgoing")  # the agent answered
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=10
        )
        assert page.records[1]["text"] == "still here"
    finally:
        await engine.stop()
