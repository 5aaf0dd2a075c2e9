"""What the engine keeps after work is done stays bounded (RSS itself: bench/agents.py --memory)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from claybot.config.settings import ProviderSettings
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from claybot.providers.base import ChatMessage, InferenceRequest
from claybot.providers.scripted import REQUESTS_KEPT, ScriptedProvider


async def test_a_finished_turn_is_answered_from_history_not_kept_in_memory(
    engine: Engine,
) -> None:
    agents = engine.agents
    turn = await agents.submit_inbound(InboundMessage("local", "u1", "c1", "hello", "m1"))
    live = await turn.outcome(10)
    assert "hello" in live.text and not live.failed
    # Done: nothing of it stays in the engine to wait on...
    assert agents.inbox_log.pending_item(turn.agent_id, turn.id) is None
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
    requests = [InferenceRequest([ChatMessage("user", f"n{n}")]) for n in range(REQUESTS_KEPT + 5)]
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
    history = str(agents.store.history_path(turn.agent_id))
    await agents.store.writer.flush()
    assert history in open_files(agents.store.root)
    assert await agents.unload_idle(older_than_s=0) == 1
    await agents.store.writer.flush()  # the close happens between the writer's batches
    assert history not in open_files(agents.store.root)
    # Woken again, it appends to the same file.
    again = await agents.submit_inbound(InboundMessage("local", "u1", "c1", "again", "m2"))
    assert "again" in (await again.outcome(10)).text
    await agents.store.writer.flush()
    assert b'"again"' in await asyncio.to_thread(Path(history).read_bytes)
    assert history in open_files(agents.store.root)
