"""What the engine keeps after work is done stays bounded (RSS itself: bench/agents.py --memory)."""

from __future__ import annotations

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
