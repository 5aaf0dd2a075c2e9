"""Damaged agent files are named, never fork a conversation silently, and show as damaged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from claybot.config.home import HomePaths
from claybot.kernel.events import Event
from tests.agents.test_agents import next_event
from tests.conftest import ECHO_SETTINGS, running_engine, write_settings


@asynccontextmanager
async def running(paths: HomePaths) -> AsyncIterator[tuple[httpx.AsyncClient, list[Event]]]:
    async with running_engine(paths) as (_, api, events):
        yield api, events


async def talk(api: httpx.AsyncClient, events: list[Event], text: str, count: int) -> str:
    response = await api.post(
        "/v1/engine/messages", json={"userId": "ann", "channelId": "c", "text": text}
    )
    assert response.status_code == 202, response.text
    await next_event(events, "agent.outgoing", count=count)
    agent_id: str = response.json()["agentId"]
    return agent_id


async def first_conversation(paths: HomePaths) -> str:
    write_settings(paths, ECHO_SETTINGS)
    async with running(paths) as (api, events):
        return await talk(api, events, "first", 1)


async def history(api: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_an_invalid_state_json_is_named_set_aside_and_the_talk_goes_on(
    paths: HomePaths,
) -> None:
    agent_id = await first_conversation(paths)
    state = paths.agents / agent_id / "state.json"
    state.write_text(json.dumps({"permissions": {"readDirs": 5}, "createdAt": "soon"}))
    async with running(paths) as (api, events):
        assert await talk(api, events, "second", 1) == agent_id
        status = (await api.get("/v1/engine/status")).json()
        listed = (await api.get("/v1/engine/agents")).json()["agents"]
        page = await history(api, agent_id)
    [problem] = status["agents"]["problems"]
    assert problem["agentId"] == agent_id and problem["file"] == str(state)
    assert "permissions.readDirs" in problem["error"] and "createdAt" in problem["error"]
    assert "no permissions" in problem["action"]
    assert [a.get("problem") for a in listed] == [problem]
    assert [e.payload for e in events if e.type == "agent.damaged"] == [problem]
    # The damaged file is kept for its owner; the agent holds no grants it cannot prove.
    assert (state.parent / "state.json.damaged").read_text().startswith('{"permissions"')
    assert json.loads(state.read_text())["permissions"]["writeDirs"] == []
    texts = [r.get("text") for r in page["records"] if r["type"] == "user_message"]
    assert texts == ["first", "second"]


def damage_descriptor(paths: HomePaths, agent_id: str, strip_history: bool = False) -> None:
    (paths.agents / agent_id / "descriptor.json").write_text('{"type": "user", "connec')
    (paths.agents / "index.jsonl").unlink()  # the index (a cache) is gone too
    if strip_history:  # an agent made before the descriptor was kept in its history
        path = paths.agents / agent_id / "history.jsonl"
        lines = path.read_text().splitlines()
        lines[0] = json.dumps({"type": "start", "at": json.loads(lines[0])["at"]})
        path.write_text("\n".join(lines) + "\n")


async def test_a_damaged_descriptor_is_rebuilt_and_the_conversation_goes_on(
    paths: HomePaths,
) -> None:
    agent_id = await first_conversation(paths)
    damage_descriptor(paths, agent_id)
    async with running(paths) as (api, events):
        assert await talk(api, events, "second", 1) == agent_id  # the same agent, not a fork
        status = (await api.get("/v1/engine/status")).json()
    assert status["agents"]["problems"] == []
    rebuilt = json.loads((paths.agents / agent_id / "descriptor.json").read_text())
    assert rebuilt == {"type": "user", "connector": "local", "userId": "ann", "channelId": "c"}


async def test_a_descriptor_that_cannot_be_rebuilt_is_reported_not_dropped(
    paths: HomePaths,
) -> None:
    agent_id = await first_conversation(paths)
    damage_descriptor(paths, agent_id, strip_history=True)
    async with running(paths) as (api, events):
        status = (await api.get("/v1/engine/status")).json()
        new_id = await talk(api, events, "second", 1)
    [problem] = status["agents"]["problems"]
    assert problem["agentId"] == agent_id
    assert problem["file"] == str(paths.agents / agent_id / "descriptor.json")
    assert "cannot be routed" in problem["action"] and "new agent" in problem["action"]
    assert new_id != agent_id  # said up front, in the status and the log, before it happens
    assert (paths.agents / agent_id / "history.jsonl").exists()  # nothing was deleted


async def test_a_damaged_history_line_is_shown_as_damaged_in_its_place(paths: HomePaths) -> None:
    agent_id = await first_conversation(paths)
    path = paths.agents / agent_id / "history.jsonl"
    lines = path.read_bytes().splitlines()
    garbage = b'{"type": "user_message", "text": "half\xff a line'
    path.write_bytes(b"\n".join([lines[0], garbage, *lines[1:]]) + b"\n")
    async with running(paths) as (api, events):
        assert await talk(api, events, "second", 1) == agent_id
        page = await history(api, agent_id)
    assert [r["type"] for r in page["records"][:4]] == [
        "start",
        "damaged",
        "user_message",
        "assistant_message",
    ]
    damaged = page["records"][1]
    assert damaged["seq"] == 1 and damaged["line"] == 2
    assert damaged["raw"].startswith('{"type": "user_message", "text": "half')
    assert "line 2 of history.jsonl is not a JSON object" in damaged["error"]
    assert page["total"] == len(page["records"])
    # The model never saw it: the reply to "second" is the echo of "second" alone.
    assert page["records"][-1]["text"] == "echo: second"


async def test_a_record_this_engine_does_not_know_is_shown_as_the_file_has_it(
    paths: HomePaths,
) -> None:
    """A newer engine's record, or a hand-edited one, is answered unchanged, never refused."""
    agent_id = await first_conversation(paths)
    path = paths.agents / agent_id / "history.jsonl"
    odd = [
        {"type": "thought", "at": 1, "text": "written by a newer engine"},
        {"type": "note", "at": 2.5, "text": "a time that is no integer"},
        {"text": "no type at all", "at": 3},
        {"type": "note", "at": 4, "text": "a field this engine does not know", "mood": "calm"},
    ]
    with path.open("a") as history_file:
        history_file.writelines(json.dumps(record) + "\n" for record in odd)
    async with running(paths) as (api, _):
        response = await api.get(f"/v1/engine/agents/{agent_id}/history", params={"after": 2})
    assert response.status_code == 200, response.text
    records = response.json()["records"]
    assert records == [{"seq": 3 + n, **record} for n, record in enumerate(odd)]
    assert [list(record) for record in records] == [["seq", *record] for record in odd]
    assert '"at":2.5' in response.text  # not turned into an integer on the way out
