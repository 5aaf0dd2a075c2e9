"""The Turn handle: what a poster waits on (accepted, replies as they come, outcome)."""

from __future__ import annotations

from typing import Any

import pytest

from claybot.agents.system import AgentNotFound
from claybot.agents.turn import TurnOutcome
from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from tests.conftest import write_settings


def scripted(*responses: Any) -> dict[str, Any]:
    return {
        "providers": [{"id": "scripted", "model": "script", "options": {"responses": responses}}]
    }


async def started(paths: HomePaths, settings: dict[str, Any]) -> Engine:
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    return engine


@pytest.fixture
async def two_step(paths: HomePaths) -> Any:
    """An engine whose model says something, calls a tool, then answers."""
    engine = await started(
        paths,
        scripted(
            {"text": "working on it", "toolCalls": [{"name": "nope", "arguments": {}}]}, "done"
        ),
    )
    yield engine
    await engine.stop(drain_timeout_s=2)


async def test_replies_stream_in_order_and_end_with_the_outcome(two_step: Engine) -> None:
    turn = await two_step.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    assert (turn.id, turn.duplicate) == ("m1", False)
    await turn.accepted()  # durable already: submit returned after the sync
    texts = [reply.text async for reply in turn.replies()]
    assert texts == ["working on it", "done"]
    assert await turn.outcome(10) == TurnOutcome("done")
    # A second reader, after the fact, sees every reply too.
    assert [reply.final async for reply in turn.replies()] == [False, True]


async def test_a_message_id_seen_before_follows_the_first_turn(two_step: Engine) -> None:
    first = await two_step.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    again = await two_step.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    assert (again.agent_id, again.id, again.duplicate) == (first.agent_id, "m1", True)
    assert await again.outcome(10) == await first.outcome(10) == TurnOutcome("done")
    # After it ended: answered from history, with the same replies.
    late = await two_step.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    assert late.duplicate
    assert [r.text async for r in late.replies()] == ["working on it", "done"]


async def test_a_failed_turn_says_so(paths: HomePaths) -> None:
    engine = await started(paths, {"providers": [{"id": "scripted", "model": "fail"}]})
    try:
        turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "go"))
        outcome = await turn.outcome(10)
        assert outcome.failed and outcome.text.startswith("Inference failed")
    finally:
        await engine.stop(drain_timeout_s=2)


async def test_reset_and_targets(engine: Engine) -> None:
    turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "hi"))
    await turn.outcome(10)
    reset = await engine.agents.reset(turn.agent_id, "fresh start")
    assert await reset.outcome(10) == TurnOutcome("")
    with pytest.raises(AgentNotFound):
        await engine.agents.submit("no-such-agent", "hello")
    with pytest.raises(AgentNotFound):
        engine.agents.turn("no-such-agent", "m1")


async def test_outcome_times_out_while_the_turn_runs(paths: HomePaths) -> None:
    # Nothing of the second turn can have happened when submit returns: its first
    # record still waits for a sync. The script has one answer, so it then fails.
    engine = await started(paths, scripted("first"))
    try:
        turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "go"))
        assert await turn.outcome(10) == TurnOutcome("first")
        blocked = await engine.agents.submit(turn.agent_id, "second")
        with pytest.raises(TimeoutError):
            await blocked.outcome(0)
        assert (await blocked.outcome(10)).failed  # the script ran out
    finally:
        await engine.stop(drain_timeout_s=2)
