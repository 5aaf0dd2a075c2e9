"""A home written before issue 40 (one typed model for a conversation) reads as it did.

``old_home/home`` was written by the engine and the history builders as they were
before the records became typed (see ``old_home/README.md``): every record shape the
builders write, and what hand edits or a newer engine leave (an extra field, an
unknown type, a record that does not match its type, a line that is no JSON).
``old_home/expected.json`` holds what that code answered for it: the history page,
the context the model got for a new message, and the lines that turn appended.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx

from claybot.agents.records import NoteRecord, decode_record, encode_record_line
from claybot.config.home import HomePaths
from claybot.providers.base import InferenceProvider
from claybot.providers.scripted import ScriptedProvider
from tests.agents.test_agents import next_event
from tests.conftest import running_engine

OLD_HOME = Path(__file__).parent / "old_home"
AGENT_ID = "fmautcndrglkdqcwhbcd0h0u"
NEW_MESSAGE = {"userId": "ann", "channelId": "c", "text": "new one", "messageId": "in20"}


def copy_old_home(paths: HomePaths) -> Path:
    shutil.copytree(OLD_HOME / "home", paths.home, dirs_exist_ok=True)
    return paths.agents / AGENT_ID / "history.jsonl"


def plain_message(message: Any) -> dict[str, Any]:
    """A context message as JSON, whatever type holds it (a field a kind of message does
    not have is as the one message type before issue 40 held it: empty)."""
    return {
        "role": message.role,
        "text": message.text,
        "toolCalls": [
            [call.id, call.name, call.arguments] for call in getattr(message, "tool_calls", ())
        ],
        "toolCallId": getattr(message, "tool_call_id", None),
        "toolName": getattr(message, "tool_name", None),
        "isError": getattr(message, "is_error", False),
        "files": [[f.name, f.mime_type, f.size, f.path] for f in getattr(message, "files", ())],
    }


def without_times(record: dict[str, Any]) -> dict[str, Any]:
    """A record appended now, with its time (and what the time is in) left out."""
    record = {**record, "at": 0}
    if isinstance(record.get("output"), dict) and "toolMessage" in record["output"]:
        message = {**record["output"]["toolMessage"], "timestamp": 0}
        record["output"] = {**record["output"], "toolMessage": message}
    return record


async def page(api: httpx.AsyncClient) -> dict[str, Any]:
    response = await api.get(f"/v1/engine/agents/{AGENT_ID}/history", params={"limit": 1000})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def observe(paths: HomePaths) -> dict[str, Any]:
    """What the engine answers for the old home, and what a new turn appends to it."""
    history = copy_old_home(paths)
    before = history.read_bytes()
    async with running_engine(paths) as (engine, api, events):
        first_page = await page(api)
        whole = await api.get(f"/v1/engine/agents/{AGENT_ID}/history")
        assert whole.status_code == 200, whole.text
        posted = await api.post("/v1/engine/messages", json=NEW_MESSAGE)
        assert posted.status_code == 202, posted.text
        assert posted.json()["agentId"] == AGENT_ID
        await next_event(events, "agent.outgoing")
        provider: InferenceProvider = engine.router.providers[0]
        assert isinstance(provider, ScriptedProvider)
        context = [plain_message(message) for message in provider.requests[-1].messages]
        last_page = await page(api)
    after = history.read_bytes()
    assert after.startswith(before)  # the old lines are left as they were, byte for byte
    appended = [json.loads(line) for line in after[len(before) :].splitlines()]
    observed = {
        "page": first_page,
        "whole": whole.json(),
        "context": context,
        "appended": [without_times(record) for record in appended],
        "pageAfter": [without_times(record) for record in last_page["records"][-2:]],
        "appendedKeys": [list(record) for record in appended],
    }
    # A stored file's path is under the home, which each run has its own of.
    text = json.dumps(observed, ensure_ascii=False).replace(str(paths.home), "$HOME")
    result: dict[str, Any] = json.loads(text)
    return result


def test_every_record_of_the_old_home_writes_back_byte_for_byte() -> None:
    history = OLD_HOME / "home" / "agents" / AGENT_ID / "history.jsonl"
    lines = history.read_bytes().splitlines(keepends=True)
    read = [(line, decode_record(line)) for line in lines]
    written = [(line, record) for line, record in read if record is not None]
    for line, record in written:
        if b'"mood"' not in line:
            assert encode_record_line(record) == line
    # The hand edit's extra field: its record reads as its type, and the runtime, which
    # has no use for the field, does not keep it (the API's page shows it: below).
    [edited] = [record for line, record in written if b'"mood"' in line]
    assert edited == NoteRecord(at=1760000000011, text="edited")
    # What is no record of its type: an unknown type, a time that is no number, no JSON.
    assert [line[:22] for line, record in read if record is None] == [
        b'{"type":"summary","at"',
        b'{"type":"user_message"',
        b"this line is no JSON\n",
    ]


async def test_an_old_home_reads_and_takes_a_turn_as_it_did(paths: HomePaths) -> None:
    observed = await observe(paths)
    expected = json.loads((OLD_HOME / "expected.json").read_text())
    assert observed["page"] == expected["page"]
    assert observed["whole"] == expected["whole"]
    assert observed["context"] == expected["context"]
    assert observed["appended"] == expected["appended"]
    assert observed["appendedKeys"] == expected["appendedKeys"]  # the fields' order too
    assert observed["pageAfter"] == expected["pageAfter"]
