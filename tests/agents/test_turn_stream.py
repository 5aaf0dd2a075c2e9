"""What a turn shows while it runs: text deltas, tool calls and results, fall-throughs,
and a reply cut off at the token limit; the durable record stays the final message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from tests.conftest import write_settings

WAIT_S = 10.0


async def started(paths: HomePaths, *providers: dict[str, Any]) -> Engine:
    write_settings(paths, {"providers": list(providers)})
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    return engine


@pytest.fixture
async def stop_later() -> AsyncIterator[list[Engine]]:
    engines: list[Engine] = []
    yield engines
    for engine in engines:
        await engine.stop(drain_timeout_s=2)


def recorded(engine: Engine) -> list[Event]:
    events: list[Event] = []
    engine.events.add_listener(events.append)
    return events


def of_type(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [event.payload for event in events if event.type == kind]


async def test_deltas_arrive_while_the_turn_runs_and_history_keeps_only_the_final_text(
    paths: HomePaths, stop_later: list[Engine]
) -> None:
    text = "one two three four five six"
    engine = await started(
        paths,
        {
            "id": "slow",
            "type": "scripted",
            "model": "script",
            # Pieces well apart: each goes out as its own delta.
            "options": {"responses": [text], "streamChunkChars": 4, "streamDelayS": 0.1},
        },
    )
    stop_later.append(engine)
    events = recorded(engine)
    turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    # The first delta comes while the turn is still running.
    async with asyncio.timeout(WAIT_S):
        while not of_type(events, "agent.delta"):
            await asyncio.sleep(0.01)
    assert not of_type(events, "agent.outgoing")
    outcome = await turn.outcome(WAIT_S)
    assert outcome.text == text
    deltas = of_type(events, "agent.delta")
    assert len(deltas) > 1 and "".join(d["text"] for d in deltas) == text
    [outgoing] = of_type(events, "agent.outgoing")
    assert {d["outgoingId"] for d in deltas} == {outgoing["message"]["id"]}
    assert {(d["agentId"], d["messageId"]) for d in deltas} == {(turn.agent_id, "m1")}
    assert events.index(next(e for e in events if e.type == "agent.outgoing")) > max(
        index for index, event in enumerate(events) if event.type == "agent.delta"
    )
    # History: the user message and one final assistant message, no deltas.
    page = await engine.agents.histories.page(turn.agent_id, after=None, before=None, limit=100)
    messages = [r for r in page.records if r["type"] in ("user_message", "assistant_message")]
    assert [(r["type"], r["text"]) for r in messages] == [
        ("user_message", "go"),
        ("assistant_message", text),
    ]


async def test_tool_calls_and_results_are_announced(
    paths: HomePaths, stop_later: list[Engine]
) -> None:
    engine = await started(
        paths,
        {
            "id": "scripted",
            "model": "script",
            "options": {
                "responses": [
                    {"toolCalls": [{"id": "c1", "name": "nope", "arguments": {"x": 1}}]},
                    "done",
                ]
            },
        },
    )
    stop_later.append(engine)
    events = recorded(engine)
    turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    await turn.outcome(WAIT_S)
    [call] = of_type(events, "agent.tool_call")
    [result] = of_type(events, "agent.tool_result")
    assert call == {
        "agentId": turn.agent_id,
        "messageId": "m1",
        "callId": "c1",
        "name": "nope",
        "arguments": '{"x":1}',
    }
    assert result["callId"] == "c1" and result["isError"] is True
    assert "Unknown tool" in result["text"]


async def test_a_fall_through_is_announced_for_the_turn_it_happened_in(
    paths: HomePaths, stop_later: list[Engine]
) -> None:
    engine = await started(
        paths,
        {"id": "broken", "type": "scripted", "model": "fail"},
        {"id": "backup", "type": "scripted", "model": "echo"},
    )
    stop_later.append(engine)
    events = recorded(engine)
    turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "hi", "m1"))
    assert (await turn.outcome(WAIT_S)).text == "echo: hi"
    [fallback] = of_type(events, "provider.fallback")
    assert fallback == {
        "from": "broken",
        "to": "backup",
        "reason": "the scripted 'fail' model always fails",
        "agentId": turn.agent_id,
        "messageId": "m1",
    }


async def test_a_reply_cut_off_at_the_token_limit_says_so(
    paths: HomePaths, stop_later: list[Engine]
) -> None:
    engine = await started(
        paths,
        {
            "id": "scripted",
            "model": "script",
            "options": {"responses": [{"text": "It all began in", "cutOff": True}]},
        },
    )
    stop_later.append(engine)
    turn = await engine.agents.submit_inbound(InboundMessage("local", "u", "c", "go", "m1"))
    text = (await turn.outcome(WAIT_S)).text
    assert text.startswith("It all began in\n\n[Cut off:") and "token limit" in text
