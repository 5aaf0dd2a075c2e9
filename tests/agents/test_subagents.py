"""Background agents through real agent turns: results and failures reach the parent once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from tests.agents.test_agents import next_event, next_reply, record_events
from tests.conftest import EngineProcess, write_settings


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": tool, "arguments": arguments}]}


def rules_settings(rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    provider = {"id": "s", "type": "scripted", "model": "rules", "options": {"rules": rules}}
    if "delayS" in extra:
        provider["options"]["delayS"] = extra.pop("delayS")
    return {"providers": [provider], **extra}


# The user asks for research; the user agent delegates it and reports what comes back.
DELEGATION = [
    {
        "match": "research the moon",
        "response": call("start_background_agent", prompt="find moon facts", name="moon"),
    },
    {"match": "Background agent started", "response": "I asked a helper."},
    {"match": "find moon facts", "response": "The moon is 384,400 km away."},
    {"match": "finished:", "response": "Result is in: the moon is far."},
    {"match": "failed:", "response": "The helper failed, sorry."},
]


async def history(engine: Engine, agent_id: str) -> list[dict[str, Any]]:
    page = await engine.agents.histories.page(agent_id, after=None, before=None, limit=1000)
    return page.records


def system_messages(records: list[dict[str, Any]], origin: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "user_message" and r.get("origin") == origin]


async def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not await predicate():
            await asyncio.sleep(0.01)


def outgoing_texts(events: list[Event]) -> list[str]:
    return [e.payload["message"]["text"] for e in events if e.type == "agent.outgoing"]


async def test_a_finished_subagent_reports_to_its_parent_exactly_once(paths: HomePaths) -> None:
    write_settings(paths, rules_settings(DELEGATION))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        posted = await engine.post_inbound(
            InboundMessage("local", "ann", "cli", "research the moon")
        )
        finished = await next_event(events, "agent.subagent.finished")
        child = finished[0].payload["agentId"]
        await next_event(events, "agent.outgoing", count=3)  # started, helper's answer, result
        parent_records = await history(engine, posted.agent_id)
        child_records = await history(engine, child)
        listing = {a["agentId"]: a for a in engine.agents.listings.agents()}
    finally:
        await engine.stop()
    assert child != posted.agent_id and listing[child]["type"] == "subagent"
    results = system_messages(parent_records, origin=child)
    assert len(results) == 1
    assert "finished" in results[0]["text"] and "384,400 km" in results[0]["text"]
    # The subagent's first message came from its parent.
    assert system_messages(child_records, origin=posted.agent_id)[0]["text"] == "find moon facts"
    user_texts = [
        e.payload["message"]["text"]
        for e in events
        if e.type == "agent.outgoing" and e.payload["agentId"] == posted.agent_id
    ]
    assert user_texts == ["I asked a helper.", "Result is in: the moon is far."]


async def test_a_failing_subagent_sends_one_failure_notice(paths: HomePaths) -> None:
    rules = [rule for rule in DELEGATION if rule["match"] != "find moon facts"]
    write_settings(paths, rules_settings(rules))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        posted = await engine.post_inbound(
            InboundMessage("local", "ann", "cli", "research the moon")
        )
        failed = await next_event(events, "agent.subagent.failed")
        await next_event(events, "agent.outgoing", count=3)
        await asyncio.sleep(0.2)  # room for a wrong second notice to show up
        child = failed[0].payload["agentId"]
        parent_records = await history(engine, posted.agent_id)
    finally:
        await engine.stop()
    notices = system_messages(parent_records, origin=child)
    assert len(notices) == 1 and "failed: Inference failed" in notices[0]["text"]
    assert [e.type for e in events].count("agent.subagent.failed") == 1
    assert "The helper failed, sorry." in outgoing_texts(events)


@pytest.mark.parametrize(
    ("outcome", "kill_after_s"),
    [
        ("finished", 0.35),
        ("finished", 0.75),
        ("finished", 1.15),
        ("finished", 1.55),
        ("failed", 0.75),
        ("failed", 1.15),
    ],
)
def test_result_reaches_the_parent_once_across_a_sigkill(
    paths: HomePaths, outcome: str, kill_after_s: float
) -> None:
    # Every model call takes 0.3 s, so the kills land in different phases: the
    # parent's turn, the subagent's turn, the notice in flight, the parent's reply.
    # A kill while start_background_agent runs leaves the model told that the call was
    # interrupted: like a careful model it looks before it starts another helper.
    recovery = [
        {"match": "engine restarted while this tool call", "response": call("list_agents")},
        {"match": "\tsubagent\t", "response": "I asked a helper."},
        {
            "match": "\tuser\t",
            "response": call("start_background_agent", prompt="find moon facts", name="moon"),
        },
    ]
    delegation = DELEGATION
    final_answer, notice_says = "Result is in: the moon is far.", "384,400 km"
    if outcome == "failed":  # the helper's model has no answer: its turn fails
        delegation = [rule for rule in DELEGATION if rule["match"] != "find moon facts"]
        final_answer, notice_says = "The helper failed, sorry.", "failed: Inference failed"
    write_settings(paths, rules_settings(recovery + delegation, delayS=0.3))
    process = EngineProcess(paths)
    process.start()
    try:
        with process.client() as client:
            posted = client.post(
                "/v1/engine/messages",
                json={"userId": "ann", "channelId": "cli", "text": "research the moon"},
            ).json()
        time.sleep(kill_after_s)
        process.kill()
        process.start()
        parent = posted["agentId"]
        with process.client() as client:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                records = client.get(
                    f"/v1/engine/agents/{parent}/history", params={"limit": 1000}
                ).json()["records"]
                if any(r.get("text") == final_answer for r in records):
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"no final answer: {records}")
            time.sleep(0.5)  # a duplicate notice would be processed by now
            records = client.get(
                f"/v1/engine/agents/{parent}/history", params={"limit": 1000}
            ).json()["records"]
            agents = client.get("/v1/engine/agents").json()["agents"]
    finally:
        process.terminate()
    children = [a["agentId"] for a in agents if a["type"] == "subagent"]
    assert len(children) == 1  # the delegation was not redone
    notices = [r for r in records if r["type"] == "user_message" and r.get("origin") == children[0]]
    assert len(notices) == 1 and notice_says in notices[0]["text"]
    finals = [r for r in records if r.get("text") == final_answer]
    assert len(finals) == 1


async def test_send_agent_message_defaults_to_the_parent_and_checks_targets(
    paths: HomePaths,
) -> None:
    # Matches need a space: a bare word could occur inside a random agent id.
    rules = [
        {
            "match": "get going",
            "response": call("start_background_agent", prompt="report progress"),
        },
        {"match": "Background agent started", "response": "ok"},
        {"match": "report progress", "response": call("send_agent_message", text="halfway there")},
        {
            "match": "Message sent to",
            "response": call("send_agent_message", text="x", agentId="nope"),
        },
        {"match": "No agent with id", "response": call("list_agents")},
        {"match": "\tsubagent\t", "response": "done reporting"},
        {"match": "halfway there", "response": "noted"},
        {"match": "finished:", "response": "all done"},
    ]
    write_settings(paths, rules_settings(rules))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "ann", "cli", "get going"))
        finished = await next_event(events, "agent.subagent.finished")
        child = finished[0].payload["agentId"]
        # The parent's answer to the child's result: the last thing that happens.
        await next_reply(events, posted.agent_id, "all done")
        parent_records = await history(engine, posted.agent_id)
        child_records = await history(engine, child)
    finally:
        await engine.stop()
    from_child = [r["text"] for r in system_messages(parent_records, origin=child)]
    assert from_child[0] == "halfway there" and "done reporting" in from_child[1]
    tool_results = [r["output"] for r in child_records if r["type"] == "tool_result"]
    assert tool_results[0] == {"text": f"Message sent to {posted.agent_id}.", "isError": False}
    assert tool_results[1]["isError"] and "No agent with id 'nope'" in tool_results[1]["text"]
    assert f"{child}\tsubagent\tsubagent:worker" in tool_results[2]["text"]
    assert "(you)" in tool_results[2]["text"]


async def test_nesting_and_children_limits_are_clear_errors(paths: HomePaths) -> None:
    rules = [
        {
            "match": "spawn two",
            "response": {
                "toolCalls": [
                    {
                        "name": "start_background_agent",
                        "arguments": {"prompt": "nest deeper", "name": "a"},
                    },
                    {
                        "name": "start_background_agent",
                        "arguments": {"prompt": "wait here", "name": "b"},
                    },
                ]
            },
        },
        {"match": "limit is 1", "response": "children limit seen"},
        {"match": "Background agent started", "response": "ok"},
        {"match": "nest deeper", "response": call("start_background_agent", prompt="nest deeper")},
        {"match": "may nest 2 deep", "response": "depth limit seen"},
        {"match": "wait here", "response": "waited"},
        {"match": "finished:", "response": "noted"},
    ]
    settings = rules_settings(rules, delayS=0.05)
    settings["agents"] = {"maxSubagentDepth": 2, "maxChildren": 1}
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "ann", "cli", "spawn two"))
        await next_event(events, "agent.subagent.finished", count=2, timeout_s=10)
        records = await history(engine, posted.agent_id)
        agents = engine.agents.listings.agents()
    finally:
        await engine.stop()
    outputs = [r["output"] for r in records if r["type"] == "tool_result"]
    assert not outputs[0]["isError"]
    assert outputs[1]["isError"] and "the limit is 1" in outputs[1]["text"]
    # Depth 1 ("a") started depth 2; depth 2 was refused a third level.
    assert sum(agent["type"] == "subagent" for agent in agents) == 2
    deep = [
        a
        for a in agents
        if a["type"] == "subagent" and a["descriptor"]["parentAgentId"] != posted.agent_id
    ]
    assert len(deep) == 1


async def test_stop_aborts_the_running_turn(paths: HomePaths) -> None:
    write_settings(paths, rules_settings([{"match": "", "response": "slow answer"}], delayS=30))
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        assert not await engine.conversations.stop_conversation(
            "local", "ann", "cli"
        )  # no agent yet
        await engine.post_inbound(InboundMessage("local", "ann", "cli", "take your time"))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        assert await engine.conversations.stop_conversation("local", "ann", "cli")
        stopped = await next_event(events, "agent.outgoing")
        assert time.monotonic() - started < 5
        assert await engine.conversations.reset_conversation("local", "ann", "cli")
        await next_event(events, "agent.reset")
    finally:
        await engine.stop()
    message = stopped[0].payload["message"]
    assert message["text"] == "Stopped." and message["final"] is True
