"""History records: the builders make the typed records of ``agents/records.py``, and
what they write reads back as the very record, each field where seed 001 put it.

(``test_old_home.py`` holds the bytes to a home written before the records were typed.)
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest

from claybot.agents.history import (
    Sent,
    assistant_message_record,
    build_context,
    damaged_record,
    note_record,
    reset_record,
    start_record,
    tool_result_record,
    turn_progress,
    user_message_record,
)
from claybot.agents.records import (
    RECORD_TYPES,
    AssistantMessageRecord,
    DamagedRecord,
    HistoryRecord,
    NoteRecord,
    ResetRecord,
    StartRecord,
    ToolResultRecord,
    UserMessageRecord,
    decode_record,
    encode_record_line,
    parse_record,
)
from claybot.files.reference import FileReference
from claybot.providers.base import (
    AssistantMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

CALL = ToolCall("c1", "note", {"note": "milk"})
REPORT = FileReference("ab" * 32, "report.pdf", "application/pdf", 1234)
# What send_file's call sent: its caption and file, not context.
SENT_FILE = assistant_message_record(
    6, "the report", "m1", final=False, outgoing_id="m1#1", files=[REPORT], tool_call_id="c1"
)
BUILT: list[tuple[HistoryRecord, type[Any]]] = [
    (start_record(1), StartRecord),
    (
        start_record(1, {"type": "user", "connector": "telegram", "userId": "7", "channelId": "7"}),
        StartRecord,
    ),
    (reset_record(2, "m0"), ResetRecord),
    (reset_record(2, "m0", "start over"), ResetRecord),
    (user_message_record(3, "hi", "m1"), UserMessageRecord),
    (user_message_record(3, "run it", "m2", origin="cron"), UserMessageRecord),
    (assistant_message_record(4, "hello", "m1", final=True), AssistantMessageRecord),
    (
        assistant_message_record(
            4,
            "on it",
            "m1",
            tool_calls=[CALL],
            usage=TokenUsage(3, 4),
            provider="p",
            model="x",
            final=False,
            outgoing_id="m1#0",
        ),
        AssistantMessageRecord,
    ),
    (assistant_message_record(4, "failed", "m1", final=True, error=True), AssistantMessageRecord),
    (SENT_FILE, AssistantMessageRecord),
    (tool_result_record(5, "m1", CALL, "noted", is_error=False), ToolResultRecord),
    (note_record(6, "a note"), NoteRecord),
    (damaged_record(3, b"{not json"), DamagedRecord),
]


@pytest.mark.parametrize(("built", "model"), BUILT)
def test_every_builder_writes_its_record_and_reads_it_back(
    built: HistoryRecord, model: type[Any]
) -> None:
    assert type(built) is model
    line = encode_record_line(built)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert decode_record(line) == built
    assert parse_record(orjson.loads(line)) == built
    # ``type`` first; a field left unset is left out, never written as null.
    data = orjson.loads(line)
    assert next(iter(data)) == "type"
    assert all(value is not None for key, value in data.items() if key != "tokens")


def test_the_fields_are_seed_001s_in_its_order() -> None:
    call = assistant_message_record(
        4, "on it", "m1", tool_calls=[CALL], usage=TokenUsage(3, 4), provider="p", model="x",
        final=False, outgoing_id="m1#0",
    )  # fmt: skip
    assert encode_record_line(call) == (
        b'{"type":"assistant_message","at":4,"messageId":"m1","text":"on it","files":[],'
        b'"toolCalls":[{"id":"c1","name":"note","arguments":{"note":"milk"}}],'
        b'"tokens":{"provider":"p","model":"x","size":{"input":3,"output":4,"cacheRead":0,'
        b'"cacheWrite":0,"total":7}},"final":false,"outgoingId":"m1#0"}\n'
    )
    assert encode_record_line(user_message_record(3, "run it", "m2", origin="cron")) == (
        b'{"type":"user_message","at":3,"messageId":"m2","text":"run it","files":[],'
        b'"origin":"cron"}\n'
    )
    assert encode_record_line(reset_record(2, "m0")) == (
        b'{"type":"reset","at":2,"messageId":"m0"}\n'
    )


def test_every_record_type_has_a_builder_above() -> None:
    assert {model for _, model in BUILT} == set(RECORD_TYPES)


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "no_such_type", "at": 1},
        {"at": 1, "text": "no type at all"},
        {"type": "user_message", "at": 1, "messageId": "m1"},  # no text
        {"type": "assistant_message", "at": "noon", "messageId": "m1", "text": "", "final": 1.5},
        {"type": "tool_result", "at": 1, "messageId": "m1", "toolCallId": "c", "toolName": "t"},
    ],
)
def test_a_record_that_matches_no_type_is_none(raw: dict[str, Any]) -> None:
    assert parse_record(raw) is None
    assert decode_record(orjson.dumps(raw)) is None


def test_a_field_a_newer_engine_added_does_not_unmake_the_record() -> None:
    # The runtime reads it as its type (the API's page shows the field: test_old_home).
    line = b'{"type":"note","at":1,"text":"n","mood":"calm"}'
    assert decode_record(line) == note_record(1, "n")
    assert parse_record(orjson.loads(line)) == note_record(1, "n")


def test_context_skips_what_is_no_context_and_what_is_damaged() -> None:
    records = [
        start_record(1),
        user_message_record(2, "hi", "m1", origin="cron"),
        damaged_record(4, b"garbage"),
        assistant_message_record(5, "on it", "m1", tool_calls=[CALL], final=False),
        SENT_FILE,
        tool_result_record(6, "m1", CALL, "noted", is_error=False),
        note_record(7, "for people, not the model"),
    ]
    assert list(build_context(records)) == [
        UserMessage('<system_message origin="cron">hi</system_message>'),
        AssistantMessage("on it", tool_calls=(CALL,)),
        ToolMessage(tool_call_id="c1", tool_name="note", text="noted"),
    ]


def test_turn_progress_reads_only_the_turns_records() -> None:
    records = [
        user_message_record(1, "hi", "m1"),
        assistant_message_record(2, "on it", "m1", tool_calls=[CALL], final=False,
                                 outgoing_id="m1#0"),
        user_message_record(3, "other", "m2"),
        SENT_FILE,
    ]  # fmt: skip
    progress = turn_progress(records, "m1")
    assert (progress.started, progress.done) == (True, False)
    assert progress.outgoing == [
        Sent("m1#0", "on it", False),
        Sent("m1#1", "the report", False, (REPORT,)),
    ]
    assert progress.unanswered_calls == [CALL]


def test_the_union_is_tagged_on_type() -> None:
    # One lookup by ``type``, not a trial of every struct in turn.
    schema = msgspec.json.schema(HistoryRecord)
    assert schema["anyOf"] and schema["discriminator"]["propertyName"] == "type"
