"""The agent system through the engine API (in-process ASGI), with the echo provider."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from tests.conftest import ECHO_SETTINGS, write_settings


async def post(api: httpx.AsyncClient, text: str, user: str = "u1", **extra: Any) -> dict[str, Any]:
    response = await api.post(
        "/v1/engine/messages", json={"userId": user, "channelId": "c1", "text": text, **extra}
    )
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def next_event(
    events: list[Event], wanted: str, count: int = 1, timeout_s: float = 5
) -> list[Event]:
    async with asyncio.timeout(timeout_s):
        while True:
            matching = [event for event in events if event.type == wanted]
            if len(matching) >= count:
                return matching
            await asyncio.sleep(0.002)


async def next_reply(events: list[Event], agent_id: str, text: str, timeout_s: float = 5) -> Event:
    """The ``agent.outgoing`` event of one agent's reply with exactly this text."""
    async with asyncio.timeout(timeout_s):
        while True:
            for event in events:
                if event.type != "agent.outgoing" or event.payload["agentId"] != agent_id:
                    continue
                if event.payload["message"]["text"] == text:
                    return event
            await asyncio.sleep(0.002)


def record_events(engine: Engine) -> list[Event]:
    events: list[Event] = []
    engine.events.add_listener(events.append)
    return events


async def history(api: httpx.AsyncClient, agent_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000})
    assert response.status_code == 200, response.text
    records: list[dict[str, Any]] = response.json()["records"]
    return records


async def test_a_message_gets_one_reply_and_lands_in_history(
    engine: Engine, api: httpx.AsyncClient
) -> None:
    events = record_events(engine)
    posted = await post(api, "hello")
    outgoing = await next_event(events, "agent.outgoing")
    message = outgoing[0].payload["message"]
    assert message["text"] == "echo: hello"
    assert message["inReplyTo"] == posted["messageId"]
    assert message["agentId"] == posted["agentId"]
    records = await history(api, posted["agentId"])
    assert [r["type"] for r in records] == ["start", "user_message", "assistant_message"]
    assert records[1]["messageId"] == posted["messageId"]
    assert records[2]["final"] is True
    assert [e.type for e in events].count("agent.created") == 1


async def test_a_user_descriptor_maps_to_the_same_agent_forever(
    engine: Engine, api: httpx.AsyncClient
) -> None:
    first = await post(api, "one")
    second = await post(api, "two")
    other = await post(api, "three", user="u2")
    assert first["agentId"] == second["agentId"]
    assert other["agentId"] != first["agentId"]


async def test_a_retried_message_id_is_accepted_once(
    engine: Engine, api: httpx.AsyncClient
) -> None:
    events = record_events(engine)
    first = await post(api, "once", messageId="client-1")
    again = await post(api, "once", messageId="client-1")
    assert again["duplicate"] is True and first["duplicate"] is False
    assert again["agentId"] == first["agentId"]
    await next_event(events, "agent.outgoing")
    await asyncio.sleep(0.05)
    records = await history(api, first["agentId"])
    assert [r["type"] for r in records].count("user_message") == 1
    assert len([e for e in events if e.type == "agent.outgoing"]) == 1


async def test_messages_are_processed_in_order(engine: Engine, api: httpx.AsyncClient) -> None:
    events = record_events(engine)
    posts = await asyncio.gather(*(post(api, f"m{i}") for i in range(30)))
    await next_event(events, "agent.outgoing", count=30)
    agent_id = posts[0]["agentId"]
    records = await history(api, agent_id)
    accepted_order = [p["messageId"] for p in posts]
    user_ids = [r["messageId"] for r in records if r["type"] == "user_message"]
    # gather() sends concurrently; acceptance order is the order each POST got its id,
    # and processing must follow exactly that order.
    assert sorted(user_ids) == sorted(accepted_order)
    replies = [r for r in records if r["type"] == "assistant_message"]
    assert [r["messageId"] for r in replies] == user_ids
    for reply, user in zip(
        replies, [r for r in records if r["type"] == "user_message"], strict=True
    ):
        assert reply["text"] == f"echo: {user['text']}"


async def test_reset_keeps_the_id_and_starts_a_new_context(
    engine: Engine, api: httpx.AsyncClient
) -> None:
    events = record_events(engine)
    posted = await post(api, "before")
    await next_event(events, "agent.outgoing")
    response = await api.post(f"/v1/engine/agents/{posted['agentId']}/reset")
    assert response.status_code == 200 and response.json()["status"] == "done"
    await next_event(events, "agent.reset")
    after = await post(api, "after")
    assert after["agentId"] == posted["agentId"]
    await next_event(events, "agent.outgoing", count=2)
    records = await history(api, posted["agentId"])
    assert [r["type"] for r in records] == [
        "start",
        "user_message",
        "assistant_message",
        "reset",
        "user_message",
        "assistant_message",
    ]
    agent = engine.agents.residency.loaded[posted["agentId"]]
    assert [m.text for m in agent.context] == ["after", "echo: after"]


async def test_unknown_agent_answers_404(api: httpx.AsyncClient) -> None:
    for path in ("/v1/engine/agents/nope/history",):
        response = await api.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "agent_not_found"
    response = await api.post("/v1/engine/agents/nope/reset")
    assert response.status_code == 404


async def test_idle_agents_sleep_and_wake_with_their_context(
    engine: Engine, api: httpx.AsyncClient
) -> None:
    events = record_events(engine)
    posted = await post(api, "remember me")
    # Idle means the turn ended, which is a step after its reply went out.
    await engine.agents.turn(posted["agentId"], posted["messageId"]).outcome(5)
    assert await engine.agents.unload_idle(older_than_s=0) == 1
    await next_event(events, "agent.sleep")
    listed = (await api.get("/v1/engine/agents")).json()["agents"]
    assert listed[0]["lifecycle"] == "sleeping"
    await post(api, "again")
    await next_event(events, "agent.woke")
    await next_event(events, "agent.outgoing", count=2)
    agent = engine.agents.residency.loaded[posted["agentId"]]
    assert [m.text for m in agent.context] == [
        "remember me",
        "echo: remember me",
        "again",
        "echo: again",
    ]


async def test_restart_restores_context_and_finishes_pending_messages(paths: Any) -> None:
    write_settings(
        paths, {"providers": [{"id": "scripted", "model": "echo", "options": {"delayS": 30}}]}
    )
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    posted = await engine.post_inbound(_inbound("pending one"))
    await engine.post_inbound(_inbound("pending two"))
    await engine.stop(drain_timeout_s=0.1)  # the slow provider is still thinking: both stay pending

    write_settings(paths, ECHO_SETTINGS)
    engine = Engine(paths, EngineOptions(port=0))
    events = record_events(engine)
    await engine.start()
    try:
        await next_event(events, "agent.outgoing", count=2)
        assert events[0].type == "agent.restored"
        replies = [e.payload["message"]["text"] for e in events if e.type == "agent.outgoing"]
        assert replies == ["echo: pending one", "echo: pending two"]
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=100
        )
        kinds = [r["type"] for r in page.records]
        assert kinds.count("user_message") == 2 and kinds.count("assistant_message") == 2
    finally:
        await engine.stop()


async def test_fetch_strategies(engine: Engine, api: httpx.AsyncClient) -> None:
    assert engine.agents.listings.most_recent("most-recent-foreground") is None
    first = await post(api, "a", user="first")
    second = await post(api, "b", user="second")
    assert engine.agents.listings.most_recent("most-recent-foreground") == second["agentId"]
    await post(api, "c", user="first")
    assert engine.agents.listings.most_recent("most-recent-foreground") == first["agentId"]
    assert engine.agents.listings.most_recent("heartbeat") is None


async def test_history_pages(engine: Engine, api: httpx.AsyncClient) -> None:
    events = record_events(engine)
    posted = await post(api, "p0")
    for i in range(1, 5):
        await post(api, f"p{i}")
    await next_event(events, "agent.outgoing", count=5)
    agent_id = posted["agentId"]
    newest = (await api.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 3})).json()
    assert newest["total"] == 11 and [r["seq"] for r in newest["records"]] == [8, 9, 10]
    older = (
        await api.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 3, "before": 8})
    ).json()
    assert [r["seq"] for r in older["records"]] == [5, 6, 7]
    tail = (await api.get(f"/v1/engine/agents/{agent_id}/history", params={"after": 9})).json()
    assert [r["seq"] for r in tail["records"]] == [10]
    assert json.dumps(tail)  # serialisable


def _inbound(text: str) -> Any:
    from claybot.connectors.base import InboundMessage

    return InboundMessage(connector="local", user_id="u", channel_id="c", text=text)


async def test_state_json_routes_to_the_latest_conversation(engine: Engine) -> None:
    """Seed 001's ``routing``: where the latest message came in (a connector's), kept
    as it was by a message that came from no connector."""
    agents = engine.agents
    first = await agents.submit_inbound(InboundMessage("local", "ann", "desk", "hi", "m1"))
    await first.outcome(10)
    later = await agents.submit_inbound(InboundMessage("local", "ann", "desk", "again", "m2"))
    await later.outcome(10)
    system = await agents.submit(first.agent_id, "a note from a task", origin="cron:daily")
    await system.outcome(10)
    assert await agents.unload_idle(older_than_s=0) == 1  # writes its state
    state = json.loads((engine.paths.agents / first.agent_id / "state.json").read_bytes())
    assert state["routing"] == {
        "connector": "local",
        "channelId": "desk",
        "userId": "ann",
        "messageId": "m2",
    }


async def test_a_page_of_agents_is_the_slice_of_the_whole_list(engine: Engine) -> None:
    """agents_page filters and sorts the directory and lists only the rows it returns:
    the same agents, in the same order, as the whole list's slice."""
    agents = engine.agents
    for n in range(7):
        # A hyphen: the search looks in ids too, and no id holds one (it could hold "u3").
        turn = await agents.submit_inbound(InboundMessage("local", f"user-{n}", "c", "hi", f"m{n}"))
        await turn.outcome(10)
    whole = agents.listings.agents()
    first, total = agents.listings.page(kind=None, text=None, offset=0, limit=3)
    rest, _ = agents.listings.page(kind=None, text=None, offset=3, limit=10)
    assert total == 7
    assert [a["agentId"] for a in first + rest] == [a["agentId"] for a in whole]
    assert first[0] == whole[0]  # the same listing
    found, count = agents.listings.page(kind="user", text="USER-3", offset=0, limit=10)
    assert count == 1 and "user-3" in found[0]["label"]  # the search ignores case
    assert agents.listings.page(kind="cron", text=None, offset=0, limit=10) == ([], 0)
