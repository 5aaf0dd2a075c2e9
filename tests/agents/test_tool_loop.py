"""The tool loop through real agent turns: errors, truncation, limits, visibility, streaming."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.providers.scripted import ScriptedProvider
from claybot.tools.base import ToolContext, ToolDefinition, ToolResult
from tests.agents.test_agents import next_event, record_events
from tests.agents.test_subagents import call, history, rules_settings
from tests.conftest import write_settings


class Size(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int


class Nothing(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def explode(arguments: BaseModel, context: ToolContext) -> ToolResult:
    raise RuntimeError("the disk is on fire")


async def flood(arguments: BaseModel, context: ToolContext) -> ToolResult:
    assert isinstance(arguments, Size)
    return ToolResult("x" * arguments.size)


async def tick(arguments: BaseModel, context: ToolContext) -> str:
    return "tick"


TEST_TOOLS = [
    ToolDefinition("explode", "always raises", Nothing, explode),
    ToolDefinition("flood", "returns size characters", Size, flood),
    ToolDefinition("tick", "returns tick", Nothing, tick),
    ToolDefinition("cron_only", "for cron agents", Nothing, tick, visible_to=frozenset({"cron"})),
]


async def run_turn(
    paths: HomePaths, rules: list[dict[str, Any]], agents: dict[str, Any] | None = None
) -> tuple[Engine, list[dict[str, Any]], list[dict[str, Any]]]:
    settings = rules_settings(rules)
    if agents:
        settings["agents"] = agents
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    for tool in TEST_TOOLS:
        engine.tools.register(tool)
    try:
        posted = await engine.post_inbound(InboundMessage("local", "ann", "cli", "start"))
        async with asyncio.timeout(10):
            while not any(
                e.type == "agent.outgoing" and e.payload["message"]["final"] for e in events
            ):
                await asyncio.sleep(0.01)
        records = await history(engine, posted.agent_id)
    finally:
        await engine.stop()
    outgoing = [e.payload["message"] for e in events if e.type == "agent.outgoing"]
    return engine, records, outgoing


def tool_outputs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["output"] for r in records if r["type"] == "tool_result"]


async def test_failing_unknown_and_misused_tools_become_error_results(paths: HomePaths) -> None:
    rules = [
        {
            "match": "start",
            "response": {
                "text": "Working on it.",
                "toolCalls": [
                    {"name": "explode", "arguments": {}},
                    {"name": "no_such_tool", "arguments": {}},
                    {"name": "flood", "arguments": {"size": "lots"}},
                    {"name": "cron_only", "arguments": {}},
                ],
            },
        },
        {"match": "", "response": "Recovered."},
    ]
    _, records, outgoing = await run_turn(paths, rules)
    outputs = tool_outputs(records)
    assert all(output["isError"] for output in outputs)
    assert outputs[0]["text"] == "explode failed: RuntimeError: the disk is on fire"
    assert outputs[1]["text"] == "Unknown tool 'no_such_tool'."
    assert outputs[2]["text"].startswith("Invalid arguments for 'flood'")
    assert outputs[3]["text"] == "Unknown tool 'cron_only'."  # not offered to user agents
    # Text written before the tool calls went out at once, not with the answer.
    assert [(m["text"], m["final"]) for m in outgoing] == [
        ("Working on it.", False),
        ("Recovered.", True),
    ]


async def test_tool_output_is_truncated_with_a_marker(paths: HomePaths) -> None:
    rules = [
        {"match": "start", "response": call("flood", size=5000)},
        {"match": "x", "response": "Read it."},
    ]
    _, records, _ = await run_turn(paths, rules, agents={"toolOutputLimit": 1000})
    [output] = tool_outputs(records)
    assert output["text"].startswith("x" * 1000)
    assert output["text"].endswith("[truncated: 4000 more characters]")


async def test_the_iteration_cap_ends_the_turn_with_a_notice(paths: HomePaths) -> None:
    rules = [{"match": "", "response": call("tick")}]  # a model that never stops
    _, records, outgoing = await run_turn(paths, rules, agents={"maxToolIterations": 3})
    assert len(tool_outputs(records)) == 3
    assert [m["text"] for m in outgoing] == [
        "[Stopped: the tool limit of 3 rounds for one message was reached.]"
    ]
    assert records[-1]["final"] is True and records[-1]["toolCalls"] == []


async def test_only_the_tools_of_the_agent_kind_are_offered(paths: HomePaths) -> None:
    engine, _, _ = await run_turn(paths, [{"match": "", "response": "hi"}])
    provider = engine.router.providers[0]
    assert isinstance(provider, ScriptedProvider)
    offered = {tool.name for tool in provider.requests[0].tools}
    assert {"tick", "explode", "request_permission", "send_agent_message"} <= offered
    assert "cron_only" not in offered and "request_permission_via_parent" not in offered


async def test_stop_during_a_tool_call_answers_the_call_and_ends_the_turn(
    paths: HomePaths,
) -> None:
    started = asyncio.Event()

    async def hang(arguments: BaseModel, context: ToolContext) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    rules = [
        {"match": "start", "response": call("hang")},
        {"match": "after", "response": "Fresh start."},
    ]
    write_settings(paths, rules_settings(rules))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    engine.tools.register(ToolDefinition("hang", "hangs", Nothing, hang))
    try:
        posted = await engine.post_inbound(InboundMessage("local", "ann", "cli", "start"))
        await asyncio.wait_for(started.wait(), 10)
        assert await engine.conversations.stop_conversation("local", "ann", "cli")
        await next_event(events, "agent.outgoing")
        await engine.post_inbound(InboundMessage("local", "ann", "cli", "after"))
        replies = await next_event(events, "agent.outgoing", count=2)
        records = await history(engine, posted.agent_id)
    finally:
        await engine.stop()
    assert [r.payload["message"]["text"] for r in replies] == ["Stopped.", "Fresh start."]
    assert tool_outputs(records) == [{"text": "Not completed: Stopped.", "isError": True}]
