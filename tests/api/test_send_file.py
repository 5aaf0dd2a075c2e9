"""``send_file`` through the socket API: a user agent sends a file from its folders to
its conversation, once, as a message carrying the file's reference (served back by
``GET /v1/engine/files/{id}``); a path it may not read is an error the model sees;
background agents have no such tool."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from claybot.config.home import HomePaths
from claybot.kernel.events import Event
from tests.agents.test_subagents import call, rules_settings
from tests.conftest import running_engine, write_settings
from tests.providers.test_request_bodies import PNG


def workspace_file(paths: HomePaths, name: str, data: bytes) -> Path:
    """A file in the workspace every new agent may read."""
    folder = paths.workspace.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


async def post(api: httpx.AsyncClient, text: str, channel: str = "c") -> str:
    posted = await api.post(
        "/v1/engine/messages", json={"userId": "ann", "channelId": channel, "text": text}
    )
    assert posted.status_code == 202, posted.text
    agent_id: str = posted.json()["agentId"]
    return agent_id


async def final_reply(events: list[Event], agent_id: str, timeout_s: float = 10) -> Event:
    async with asyncio.timeout(timeout_s):
        while True:
            for event in events:
                payload = event.payload
                if (
                    event.type == "agent.outgoing"
                    and payload["agentId"] == agent_id
                    and payload["message"]["final"]
                ):
                    return event
            await asyncio.sleep(0.01)


async def history(api: httpx.AsyncClient, agent_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000})
    assert response.status_code == 200, response.text
    records: list[dict[str, Any]] = response.json()["records"]
    return records


def with_files(events: list[Event]) -> list[dict[str, Any]]:
    return [
        event.payload["message"]
        for event in events
        if event.type == "agent.outgoing" and "files" in event.payload["message"]
    ]


async def test_send_file_sends_the_file_once_and_it_can_be_fetched(paths: HomePaths) -> None:
    picture = workspace_file(paths, "map.png", PNG)
    rules = [
        {"match": "send me the map",
         "response": call("send_file", path=str(picture), caption="The map you asked for")},
        {"match": "Sent map.png", "response": "There it is."},
    ]  # fmt: skip
    write_settings(paths, rules_settings(rules))
    async with running_engine(paths) as (engine, api, events):
        agent_id = await post(api, "send me the map")
        final = await final_reply(events, agent_id)
        assert final.payload["message"]["text"] == "There it is."
        (sent,) = with_files(events)
        assert sent["text"] == "The map you asked for" and not sent["final"]
        assert (sent["connector"], sent["userId"], sent["channelId"]) == ("local", "ann", "c")
        (file,) = sent["files"]
        assert (file["name"], file["mimeType"], file["size"]) == ("map.png", "image/png", len(PNG))
        served = await api.get(f"/v1/engine/files/{file['id']}")
        assert served.status_code == 200 and served.content == PNG
        records = await history(api, agent_id)
        where = engine.files.location(file["id"])
    # The history keeps the message with its file (what keeps the file from collection),
    # under the outgoing id the event carried, naming the call that sent it.
    (recorded,) = [r for r in records if r["type"] == "assistant_message" and r["files"]]
    # Beside the reference, where the store keeps its bytes (what seed 000's dashboard shows).
    placed = [{k: v for k, v in f.items() if k != "path"} for f in recorded["files"]]
    assert recorded["outgoingId"] == sent["id"] and placed == [file]
    assert recorded["files"][0]["path"] == str(where)
    calls = [c for r in records if r["type"] == "assistant_message" for c in r["toolCalls"]]
    assert [c["name"] for c in calls] == ["send_file"]
    assert recorded["toolCallId"] == calls[0]["id"]
    (result,) = [r for r in records if r["type"] == "tool_result"]
    assert not result["output"]["isError"]


async def test_what_cannot_be_sent_is_an_error_the_model_sees(paths: HomePaths) -> None:
    big = workspace_file(paths, "big.bin", b"x" * 2048)
    outside = paths.home / "elsewhere" / "secret.txt"
    outside.parent.mkdir(parents=True)
    outside.write_text("not for the model")
    missing = paths.workspace.resolve() / "nothing-here.txt"
    settings = rules_settings(
        [
            {"match": "send the secret", "response": call("send_file", path=str(outside))},
            {"match": "send the big one", "response": call("send_file", path=str(big))},
            {"match": "send nothing", "response": call("send_file", path=str(missing))},
            {"match": "send_file", "response": "I could not send it."},
        ],
        files={"maxFileBytes": 1024},
    )
    write_settings(paths, settings)
    async with running_engine(paths) as (_, api, events):
        results = []
        for ask in ("send the secret", "send the big one", "send nothing"):
            agent_id = await post(api, ask, channel=ask)  # a conversation each
            await final_reply(events, agent_id)
            records = await history(api, agent_id)
            (result,) = [r["output"] for r in records if r["type"] == "tool_result"]
            results.append(result)
        replies = [e.payload["message"]["text"] for e in events if e.type == "agent.outgoing"]
    assert with_files(events) == []
    assert replies == ["I could not send it."] * 3
    assert all(output["isError"] for output in results)
    refused, too_big, not_there = (output["text"] for output in results)
    assert "send_file refused" in refused and "read access to" in refused
    assert str(outside.resolve()) in refused and "not granted" in refused
    assert "files.maxFileBytes" in too_big and "2048 bytes" in too_big
    assert "no such file" in not_there and str(missing) in not_there


async def test_only_user_agents_have_send_file(paths: HomePaths) -> None:
    report = workspace_file(paths, "report.txt", b"moon facts")
    rules = [
        {"match": "send it from a helper",
         "response": call("start_background_agent", prompt="helper: send the report")},
        {"match": "helper: send the report",
         "response": call("send_file", path=str(report))},
        {"match": "Unknown tool 'send_file'", "response": "I have no send_file."},
        {"match": "Background agent started", "response": "I asked a helper."},
        {"match": "finished:", "response": "The helper could not send it."},
    ]  # fmt: skip
    write_settings(paths, rules_settings(rules))
    async with running_engine(paths) as (engine, api, events):
        agent_id = await post(api, "send it from a helper")
        async with asyncio.timeout(10):
            while not any(
                e.type == "agent.outgoing"
                and e.payload["message"]["text"] == "The helper could not send it."
                for e in events
            ):
                await asyncio.sleep(0.01)
        (finished,) = [e for e in events if e.type == "agent.subagent.finished"]
        child = finished.payload["agentId"]
        child_records = await history(api, child)
        visible = {kind: [s.name for s in engine.tools.schemas_for(kind)] for kind in
                   ("user", "subagent", "cron", "heartbeat", "job")}  # fmt: skip
    assert child != agent_id
    (result,) = [r for r in child_records if r["type"] == "tool_result"]
    output = result["output"]
    assert (output["text"], output["isError"]) == ("Unknown tool 'send_file'.", True)
    assert with_files(events) == []
    assert "send_file" in visible["user"]
    assert all("send_file" not in names for kind, names in visible.items() if kind != "user")
