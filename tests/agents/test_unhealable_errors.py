"""Bad input never wedges a conversation: an error waiting cannot heal ends the turn with
its reason and the next message is answered; one waiting may heal (a full disk) is
tried again ever more slowly, and the agent shows as stuck until it gets through.

Through the socket API of an engine in-process: a file name past what the file system
takes as a name (255 bytes: 243 characters were enough before, with the placed
copy's prefix), a folder that cannot take the file, a write refused with EFBIG, and
a disk that stays full.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from claybot.config.home import HomePaths
from claybot.kernel.events import Event
from tests.agents.test_disk_full import FullDisk, disk  # noqa: F401  (a fixture)
from tests.agents.test_file_isolation import turn_records
from tests.conftest import ECHO_SETTINGS, running_engine, write_settings

LONG_NAME = "quarterly-report-" + "x" * 280 + ".pdf"  # 301 bytes
LONG_WIDE_NAME = "é" * 200 + ".txt"  # 200 characters, 404 bytes


async def post(
    api: httpx.AsyncClient, text: str, files: list[dict[str, Any]] | None = None
) -> tuple[str, str]:
    body: dict[str, Any] = {"userId": "ann", "channelId": "c", "text": text}
    if files:
        body["files"] = files
    posted = await api.post("/v1/engine/messages", json=body)
    assert posted.status_code == 202, posted.text
    return posted.json()["agentId"], posted.json()["messageId"]


async def upload(api: httpx.AsyncClient, name: str, data: bytes) -> dict[str, Any]:
    response = await api.post("/v1/engine/files", files={"file": (name, data, "text/plain")})
    assert response.status_code == 201, response.text
    file: dict[str, Any] = response.json()["file"]
    return file


def final_text(records: list[dict[str, Any]]) -> str:
    (final,) = [r for r in records if r["type"] == "assistant_message" and r["final"]]
    text: str = final["text"]
    return text


async def test_a_file_name_past_the_file_systems_limit_is_answered_and_the_chat_goes_on(
    paths: HomePaths,
) -> None:
    write_settings(paths, ECHO_SETTINGS)
    async with running_engine(paths) as (engine, api, _):
        files = [await upload(api, name, name.encode()) for name in (LONG_NAME, LONG_WIDE_NAME)]
        agent_id, message_id = await post(
            api, "two files", [{"id": f["id"], "name": f["name"]} for f in files]
        )
        records = await turn_records(api, agent_id, message_id)
        agent_id, message_id = await post(api, "and then?")
        after = await turn_records(api, agent_id, message_id)
        status = (await api.get("/v1/engine/status")).json()
        # Nothing left waiting (the last reply is in history a moment before its item
        # is marked done).
        async with asyncio.timeout(30):
            while engine.agents.pending_count():
                await asyncio.sleep(0.02)
    (sent,) = [r for r in records if r["type"] == "user_message"]
    placed = [Path(file["path"]) for file in sent["files"]]
    assert [path.suffix for path in placed] == [".pdf", ".txt"]
    for path, name in zip(placed, (LONG_NAME, LONG_WIDE_NAME), strict=True):
        assert len(path.name.encode()) <= 255
        assert path.read_bytes() == name.encode()
    assert final_text(records).startswith("echo: two files")
    assert final_text(after) == "echo: and then?"
    assert status["agents"]["stuck"] == []


async def test_a_file_that_cannot_be_placed_is_named_to_the_model_and_the_turn_goes_on(
    paths: HomePaths,
) -> None:
    write_settings(paths, ECHO_SETTINGS)
    async with running_engine(paths) as (_, api, _):
        agent_id, message_id = await post(api, "hello")
        await turn_records(api, agent_id, message_id)
        # Where its files go is taken by a file: no folder can be made there.
        (paths.received / agent_id).write_text("in the way")
        file = await upload(api, "notes.txt", b"some notes")
        agent_id, message_id = await post(
            api, "my notes", [{"id": file["id"], "name": "notes.txt"}]
        )
        records = await turn_records(api, agent_id, message_id)
    (sent,) = [r for r in records if r["type"] == "user_message"]
    (listed,) = sent["files"]
    # No place is named (the API answers an empty one, as seed 000's dashboard reads it).
    assert not listed.get("path") and "could not be saved for you" in listed["problem"]
    assert "[Attached file: notes.txt: it could not be saved for you" in final_text(records)


async def test_a_write_refused_the_same_way_every_time_ends_the_turn_with_its_reason(
    paths: HomePaths,
    disk: FullDisk,  # noqa: F811
) -> None:
    write_settings(paths, ECHO_SETTINGS)
    async with running_engine(paths) as (_, api, events):
        agent_id, message_id = await post(api, "hello")
        await turn_records(api, agent_id, message_id)
        # Every write of this message to the history is refused as too large (EFBIG): no
        # wait makes it fit. Without the fix the turn was tried again ten times a second.
        disk.fill(
            lambda path, data: path.endswith("history.jsonl") and b"POISON" in data,
            error=errno.EFBIG,
        )
        agent_id, message_id = await post(api, "POISON")
        records = await turn_records(api, agent_id, message_id)
        agent_id, message_id = await post(api, "still there?")
        after = await turn_records(api, agent_id, message_id)
        status = (await api.get("/v1/engine/status")).json()
    assert final_text(records) == (
        f"This message could not be processed ({os.strerror(errno.EFBIG)}); it was not completed."
    )
    assert final_text(after) == "echo: still there?"
    assert status["agents"]["stuck"] == []
    assert [e for e in events if e.type == "agent.storage_failed"] == []


async def stuck_of(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    stuck: list[dict[str, Any]] = (await api.get("/v1/engine/status")).json()["agents"]["stuck"]
    return stuck


async def test_an_agent_a_full_disk_stops_shows_as_stuck_and_tries_ever_more_slowly(
    paths: HomePaths,
    disk: FullDisk,  # noqa: F811
) -> None:
    write_settings(paths, ECHO_SETTINGS)
    async with running_engine(paths) as (_, api, events):
        agent_id, message_id = await post(api, "hello")
        await turn_records(api, agent_id, message_id)
        # The reply cannot be written: the message is accepted, its turn cannot end.
        disk.fill(lambda path, data: path.endswith("history.jsonl") and b"echo:" in data)
        agent_id, message_id = await post(api, "are you there?")
        async with asyncio.timeout(30):
            while not (stuck := await stuck_of(api)) or stuck[0]["failures"] < 4:
                await asyncio.sleep(0.02)
        (one,) = stuck
        assert one["agentId"] == agent_id and one["error"] == os.strerror(errno.ENOSPC)
        listing = (await api.get("/v1/engine/agents")).json()["agents"]
        assert [a["stuck"]["failures"] >= 4 for a in listing if a["agentId"] == agent_id] == [True]
        failed_at = [stamp(e) for e in events if e.type == "agent.storage_failed"]
        disk.free()
        records = await turn_records(api, agent_id, message_id)
        # The reply is in history a moment before its item is marked done and the agent
        # is no longer stuck.
        async with asyncio.timeout(30):
            while await stuck_of(api):
                await asyncio.sleep(0.02)
    # Each try waited at least twice as long as the one before (0.1 s, 0.2 s, 0.4 s).
    waits = [later - earlier for earlier, later in itertools.pairwise(failed_at)]
    assert all(wait >= 0.1 * 2**n for n, wait in enumerate(waits[:3])), waits
    assert final_text(records) == "echo: are you there?"


def stamp(event: Event) -> float:
    return datetime.fromisoformat(event.timestamp.replace("Z", "+00:00")).timestamp()
