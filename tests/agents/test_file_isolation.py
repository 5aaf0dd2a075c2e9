"""One conversation's files are its agent's: another user's agent reaches them by no tool,
and nothing any agent does changes a stored file.

Ann sends a file; it is placed for her agent. Then, in real turns driven by a scripted
model, Bob's agent tries every tool on the path her agent was given (``read``,
``write``, ``exec``, ``send_file``) and fails; Ann's own agent reads it, may pass it on
to a subagent, and cannot change it (nor the stored copy) by ``write`` or ``exec``.
The path is learnt from a first run of the engine and the model's rules are written
for a second: a scripted model's rules are settings.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from tests.agents.test_subagents import call, rules_settings
from tests.conftest import ECHO_SETTINGS, running_engine, write_settings
from tests.sandbox.test_exec import bwrap_works

SECRET = b"ann's bank statement: TOP-SECRET-4711\n"
needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap missing or unusable here")


async def say(api: httpx.AsyncClient, user: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    """Post ``text`` as ``user`` (a channel each), wait for the turn's end: its agent id
    and its history."""
    body = {"userId": user, "channelId": user, "text": text}
    posted = await api.post("/v1/engine/messages", json=body)
    assert posted.status_code == 202, posted.text
    agent_id, message_id = posted.json()["agentId"], posted.json()["messageId"]
    return agent_id, await turn_records(api, agent_id, message_id)


async def turn_records(
    api: httpx.AsyncClient, agent_id: str, message_id: str
) -> list[dict[str, Any]]:
    async with asyncio.timeout(30):
        while True:
            response = await api.get(
                f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000}
            )
            records = [r for r in response.json()["records"] if r.get("messageId") == message_id]
            if any(r["type"] == "assistant_message" and r["final"] for r in records):
                return records
            await asyncio.sleep(0.02)


def tool_output(records: list[dict[str, Any]]) -> dict[str, Any]:
    (result,) = [r["output"] for r in records if r["type"] == "tool_result"]
    return result


async def place_anns_file(paths: HomePaths) -> tuple[str, Path, str]:
    """A first run: Ann sends her file. Her agent's id, where the file was placed for
    it, and the stored file's id."""
    write_settings(paths, ECHO_SETTINGS)
    async with running_engine(paths) as (_, api, _):
        uploaded = await api.post(
            "/v1/engine/files", files={"file": ("statement.txt", SECRET, "text/plain")}
        )
        file_id = uploaded.json()["file"]["id"]
        body = {"userId": "ann", "channelId": "ann", "text": "keep this",
                "files": [{"id": file_id, "name": "statement.txt"}]}  # fmt: skip
        posted = await api.post("/v1/engine/messages", json=body)
        agent_id, message_id = posted.json()["agentId"], posted.json()["messageId"]
        records = await turn_records(api, agent_id, message_id)
    (sent,) = [r for r in records if r["type"] == "user_message"]
    (file,) = sent["files"]
    return agent_id, Path(file["path"]), file_id


def stored_intact(paths: HomePaths, file_id: str) -> bool:
    blob = paths.files / "blobs" / file_id[:2] / file_id
    return hashlib.sha256(blob.read_bytes()).hexdigest() == file_id


async def test_another_users_agent_reaches_a_received_file_by_no_file_tool(
    paths: HomePaths,
) -> None:
    ann_id, placed, file_id = await place_anns_file(paths)
    folder = str(placed.parent)
    rules = [
        {"match": "bob-read", "response": call("read", path=str(placed))},
        {"match": "bob-write",
         "response": call("write", path=str(placed), content="owned\n", append=True)},
        {"match": "bob-send", "response": call("send_file", path=str(placed))},
        {"match": "bob-ask", "response": call(
            "request_permission", permission=f"@read:{folder}", reason="I need it")},
        {"match": "ann-read", "response": call("read", path=str(placed))},
        {"match": "ann-append",
         "response": call("write", path=str(placed), content="changed\n", append=True)},
        {"match": "ann-overwrite", "response": call("write", path=str(placed), content="x")},
        {"match": "ann-send", "response": call("send_file", path=str(placed))},
        {"match": "ann-delegate", "response": call(
            "start_background_agent", name="helper", prompt="sub-read",
            permissions=[f"@read:{folder}"])},
        {"match": "ann-unshared", "response": call(
            "start_background_agent", name="other", prompt="sub-read")},
        {"match": "sub-read", "response": call("read", path=str(placed))},
        {"match": "", "response": "done"},
    ]  # fmt: skip
    write_settings(
        paths,
        {**rules_settings(rules), "plugins": [{"instanceId": "shell", "pluginId": "shell"}]},
    )
    async with running_engine(paths) as (_, api, events):
        bob_outputs = []
        for ask in ("bob-read", "bob-write", "bob-send", "bob-ask"):
            bob_id, records = await say(api, "bob", ask)
            bob_outputs.append(tool_output(records))
        ann_outputs = {}
        for ask in ("ann-read", "ann-append", "ann-overwrite", "ann-send"):
            agent_id, records = await say(api, "ann", ask)
            assert agent_id == ann_id
            ann_outputs[ask] = tool_output(records)
        for ask in ("ann-delegate", "ann-unshared"):
            await say(api, "ann", ask)
        subagent_reads: list[dict[str, Any]] = []
        async with asyncio.timeout(30):
            while len(subagent_reads) < 2:
                await asyncio.sleep(0.02)
                subagent_reads = [
                    e.payload for e in events if e.type == "agent.tool_result"
                    and e.payload["name"] == "read"
                    and e.payload["agentId"] not in (ann_id, bob_id)
                ]  # fmt: skip
        sent_files = [
            e.payload["message"] for e in events
            if e.type == "agent.outgoing" and e.payload["message"].get("files")
        ]  # fmt: skip
        served = await api.get(f"/v1/engine/files/{file_id}")

    read, write, send, ask = bob_outputs
    assert read["isError"] and "another conversation's files" in read["text"]
    assert write["isError"] and "no agent may write there" in write["text"]
    assert send["isError"] and "another conversation's files" in send["text"]
    # Nor may Bob's agent ask Bob for a grant of Ann's files (Bob would answer it).
    assert ask["isError"] and "no agent may be granted another's" in ask["text"]
    assert SECRET.decode() not in str(bob_outputs)

    read_back = ann_outputs["ann-read"]
    assert (read_back["isError"], read_back["text"]) == (False, SECRET.decode())
    for ask in ("ann-append", "ann-overwrite"):
        assert ann_outputs[ask]["isError"], ann_outputs[ask]
        assert "no agent may write there" in ann_outputs[ask]["text"]
    assert not ann_outputs["ann-send"]["isError"]
    # Only Ann's own agent sent it, to her own conversation.
    assert [(m["userId"], m["files"][0]["id"]) for m in sent_files] == [("ann", file_id)]

    # Passed on to one subagent, which reads it; not to the other.
    shared, unshared = sorted(subagent_reads, key=lambda p: p["isError"])
    assert not shared["isError"] and SECRET.decode() in shared["text"]
    assert unshared["isError"] and "another conversation's files" in unshared["text"]

    # Nothing changed the placed copy, nor the stored file under its id.
    assert placed.read_bytes() == SECRET
    assert stored_intact(paths, file_id)
    assert served.content == SECRET


@needs_bwrap
async def test_another_users_agent_cannot_see_a_received_file_from_exec(
    paths: HomePaths,
) -> None:
    _, placed, file_id = await place_anns_file(paths)
    received = placed.parent.parent
    rules = [
        {"match": "bob-cat", "response": call("exec", command=f"cat {placed}")},
        {"match": "bob-list", "response": call("exec", command=f"ls -a {received}")},
        {"match": "ann-cat", "response": call("exec", command=f"cat {placed}")},
        {"match": "ann-change",
         "response": call("exec", command=f"echo changed >> {placed}; chmod u+w {placed}")},
        {"match": "ann-replace",
         "response": call("exec", command=f"rm -f {placed}; echo x > {placed}")},
        {"match": "", "response": "done"},
    ]  # fmt: skip
    write_settings(
        paths,
        {**rules_settings(rules), "plugins": [{"instanceId": "shell", "pluginId": "shell"}]},
    )
    async with running_engine(paths) as (_, api, _):
        outputs = {}
        for user, ask in (("bob", "bob-cat"), ("bob", "bob-list"), ("ann", "ann-cat"),
                          ("ann", "ann-change"), ("ann", "ann-replace")):  # fmt: skip
            outputs[ask] = tool_output((await say(api, user, ask))[1])

    assert outputs["bob-cat"]["isError"] and "No such file" in outputs["bob-cat"]["text"]
    assert placed.parent.name not in outputs["bob-list"]["text"]  # not even the folder
    assert not outputs["ann-cat"]["isError"] and SECRET.decode() in outputs["ann-cat"]["text"]
    assert outputs["ann-change"]["isError"] and "Read-only file system" in str(outputs)
    assert outputs["ann-replace"]["isError"]
    assert placed.read_bytes() == SECRET
    assert stored_intact(paths, file_id)


async def test_files_an_older_engine_placed_in_the_workspace_are_made_private_at_start(
    paths: HomePaths,
) -> None:
    """Engines before this one placed a received file as a hard link to the stored one
    in ``workspace/files/<agent id>/``, where every agent reads and writes."""
    ann_id, placed, file_id = await place_anns_file(paths)
    blob = paths.files / "blobs" / file_id[:2] / file_id
    old = paths.workspace / "files" / ann_id
    old.mkdir(parents=True)
    os.link(blob, old / placed.name)  # as an older engine placed it
    placed.unlink()  # and nothing in received/ yet
    (old / "notes.txt").write_text("the agent's own")  # not of the placed shape
    (old / f"{'0' * 12}-link.txt").symlink_to(paths.auth)  # an agent's trap: not moved
    stranger = paths.workspace / "files" / "not-an-agent"
    stranger.mkdir()
    (stranger / f"{'1' * 12}-x.txt").write_text("x")
    async with running_engine(paths):
        async with asyncio.timeout(30):
            # The repair at start is done once the old link has left the workspace (it
            # detaches the store's files first). ``placed`` alone can appear earlier: a
            # resumed turn places its files again, as a copy.
            while not placed.exists() or (old / placed.name).exists():
                await asyncio.sleep(0.02)
    assert placed.read_bytes() == SECRET
    assert stat.S_IMODE(placed.stat().st_mode) == 0o400
    assert blob.stat().st_nlink == 1 and placed.stat().st_nlink == 1
    assert sorted(p.name for p in old.iterdir()) == [f"{'0' * 12}-link.txt", "notes.txt"]
    assert (stranger / f"{'1' * 12}-x.txt").exists()
    assert stored_intact(paths, file_id)
