"""What the engine keeps after work is done stays bounded (RSS itself: bench/agents.py --memory)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import tracemalloc
from pathlib import Path

import pydantic.main

from claybot.agents.state import AgentState
from claybot.config.home import HomePaths
from claybot.config.settings import ProviderSettings
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.providers.base import (
    InferenceRequest,
    UserMessage,
)
from claybot.providers.scripted import REQUESTS_KEPT, ScriptedProvider
from tests.conftest import ECHO_SETTINGS, write_settings


async def test_a_finished_turn_is_answered_from_history_not_kept_in_memory(
    engine: Engine,
) -> None:
    agents = engine.agents
    turn = await agents.submit_inbound(InboundMessage("local", "u1", "c1", "hello", "m1"))
    live = await turn.outcome(10)
    assert "hello" in live.text and not live.failed
    # Done: nothing of it stays in the engine to wait on...
    assert agents.runtime.inbox_log.pending_item(turn.agent_id, turn.id) is None
    assert await agents.unload_idle(older_than_s=0) == 1
    # ...and asked again later (a scheduler after a restart), history answers.
    again = agents.turn(turn.agent_id, turn.id)
    assert again.duplicate
    assert await again.outcome(10) == live
    assert [reply.text async for reply in agents.turn(turn.agent_id, turn.id).replies()] == [
        live.text
    ]


async def test_the_scripted_provider_keeps_only_its_recent_requests() -> None:
    provider = ScriptedProvider(ProviderSettings(id="scripted", model="echo"))
    requests = [InferenceRequest([UserMessage(f"n{n}")]) for n in range(REQUESTS_KEPT + 5)]
    for request in requests:
        await provider.complete(request)
    assert provider.requests == requests[-REQUESTS_KEPT:]


def open_files(directory: Path) -> set[str]:
    """The files under ``directory`` this process holds open."""
    held = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith(str(directory)):
                held.add(target)
    return held


async def test_an_agent_that_leaves_memory_lets_its_history_file_close(engine: Engine) -> None:
    agents = engine.agents
    turn = await agents.submit_inbound(InboundMessage("local", "u1", "c1", "hello", "m1"))
    await turn.outcome(10)
    history = str(agents.runtime.store.history_path(turn.agent_id))
    await agents.runtime.store.writer.flush()
    assert history in open_files(agents.runtime.store.root)
    assert await agents.unload_idle(older_than_s=0) == 1
    await agents.runtime.store.writer.flush()  # the close happens between the writer's batches
    assert history not in open_files(agents.runtime.store.root)
    # Woken again, it appends to the same file.
    again = await agents.submit_inbound(InboundMessage("local", "u1", "c1", "again", "m2"))
    assert "again" in (await again.outcome(10)).text
    await agents.runtime.store.writer.flush()
    assert b'"again"' in await asyncio.to_thread(Path(history).read_bytes)
    assert history in open_files(agents.runtime.store.root)


async def test_when_every_agent_went_idle_the_journal_is_checkpointed(paths: HomePaths) -> None:
    """The last idle unload checkpoints at once (not a minute later): the files the load
    wrote are synced, the write-ahead log holds no redo record for a boot to replay, and
    the writer lets go of the paths it kept for that sync."""
    write_settings(paths, {**ECHO_SETTINGS, "agents": {"idleUnloadS": 0.2}})
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    try:
        agents = engine.agents
        for user in ("u1", "u2"):
            turn = await agents.submit_inbound(InboundMessage("local", user, "c", "hi", user))
            await turn.outcome(10)
        assert b'"op":"redo"' in agents.runtime.inbox_log.path.read_bytes()
        async with asyncio.timeout(10):
            while agents.loaded_count or agents.runtime.inbox_log.appended_since_checkpoint:
                await asyncio.sleep(0.05)
        assert agents.runtime.inbox_log.path.read_bytes() == b""  # nothing pending, nothing to redo
    finally:
        await engine.stop()


def test_reading_states_leaves_none_of_their_strings_behind() -> None:
    """Each load reads its agents' state.json; strings from them that outlived the read
    (pydantic-core caches parsed strings process-wide) pinned that load's memory."""
    tracemalloc.start()
    try:
        for n in range(2000):
            routing = {"connector": "local", "userId": f"user{n}", "messageId": f"message{n}"}
            raw = json.dumps({"routing": routing, "createdAt": n, "updatedAt": n})
            AgentState.model_validate_json(raw)
        gc.collect()
        kept = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, pydantic.main.__file__)]
        )
    finally:
        tracemalloc.stop()
    assert sum(stat.count for stat in kept.statistics("lineno")) < 100
