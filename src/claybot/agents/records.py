"""History records as types: one msgspec struct per line type of ``history.jsonl``.

``HistoryRecord`` is a union tagged on ``type``. The builders of ``history.jsonl``
(``history.py``) make these structs and the stores write them as they are; the
runtime reads history back through them (``decode_record`` for a line,
``parse_record`` for a record already read as JSON): context rebuilding, turn
recovery and job transcripts all see the same typed records, from the model's
answer to the file and back.

msgspec rather than pydantic because a record is built and written on every step
of a turn: a struct builds and encodes in about half the time of the plain dict
and ``orjson.dumps`` it replaces (1.1 us against 2.3 us for an assistant message),
where building and dumping a pydantic model cost several times the dict.

What a struct writes is seed 001's line, byte for byte: the fields in the order
they are declared, ``type`` first; a field that is ``UNSET`` is left out (never
written as null); ``tokens`` is null when the call reported none, as it always
was. ``tests/agents/old_home`` holds that to a home written before these types.

A line that does not match its type (a hand edit, a newer engine's record) reads
as ``None`` here: the model never sees it. The API shows the file's lines as they
are, extra fields and unknown types included (``wire/history.py``'s models allow
them); the runtime has no use for fields it does not know, so a struct drops them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from claybot.providers.base import ToolCall

__all__ = [
    "RECORD_TYPES",
    "UNSET",
    "AssistantMessageRecord",
    "DamagedRecord",
    "HistoryRecord",
    "NoteRecord",
    "ResetRecord",
    "StartRecord",
    "TokenCounts",
    "TokenUsageRecord",
    "ToolOutput",
    "ToolResultRecord",
    "UnsetType",
    "UserMessageRecord",
    "decode_record",
    "encode_record_line",
    "parse_record",
]


class RecordStruct(msgspec.Struct, frozen=True, tag_field="type"):
    """A line of history.jsonl; ``type`` is each subclass's tag, written first."""


class StartRecord(RecordStruct, tag="start", frozen=True):
    """The agent's first record; it carries the descriptor, so a lost descriptor.json is
    rebuilt from it."""

    at: int  # unix milliseconds, as every record's
    descriptor: dict[str, Any] | UnsetType = UNSET  # AgentDescriptor's fields


class ResetRecord(RecordStruct, tag="reset", frozen=True):
    """The context was cleared here; the model sees nothing before it."""

    at: int
    messageId: str
    message: str | UnsetType = UNSET  # said to the agent after the reset


class UserMessageRecord(RecordStruct, tag="user_message", frozen=True):
    at: int
    messageId: str
    text: str
    # File references, each with the path the agent reads it at, or a ``problem`` when
    # it could not be placed (``files.placement.PlacedFile`` when written). Read back
    # untyped on purpose: a malformed entry in an old line must not lose the message
    # (its readers, ``history.attachments``, check each entry).
    files: list[Any] = msgspec.field(default_factory=list)
    origin: str | UnsetType = UNSET  # who posted it when no person did: `cron`, a subagent


class TokenCounts(msgspec.Struct, frozen=True):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    total: int


class TokenUsageRecord(msgspec.Struct, frozen=True):
    provider: str | None
    model: str | None
    size: TokenCounts


# Keyword-only: ``final`` (required) follows fields with defaults, in the file's order.
class AssistantMessageRecord(RecordStruct, tag="assistant_message", frozen=True, kw_only=True):
    at: int
    messageId: str  # the inbound message this answers
    text: str
    files: list[Any] = msgspec.field(default_factory=list)  # file references (FileReference)
    toolCalls: list[ToolCall] = msgspec.field(default_factory=list)
    tokens: TokenUsageRecord | None = None
    final: bool  # the turn's last record: the message is done
    outgoingId: str | UnsetType = UNSET  # the reply delivered, if any
    error: bool | UnsetType = UNSET  # the turn ended in an error (written only as true)
    # The tool call that sent this message (send_file: ``files``, captioned by ``text``);
    # not context: the call's result tells the model.
    toolCallId: str | UnsetType = UNSET


class ToolOutput(msgspec.Struct, frozen=True):
    text: str
    isError: bool


class ToolResultRecord(RecordStruct, tag="tool_result", frozen=True):
    at: int
    messageId: str
    toolCallId: str
    toolName: str
    output: ToolOutput


class NoteRecord(RecordStruct, tag="note", frozen=True):
    at: int
    text: str


class DamagedRecord(RecordStruct, tag="damaged", frozen=True):
    """A line of history.jsonl that is no JSON object (or a job's row that is no record
    of a known type): shown, never given to the model. Readers make it; it is never
    written."""

    line: int  # the line's number (a job's row: its seq)
    raw: str  # the line's first 500 bytes
    error: str


HistoryRecord = (
    StartRecord
    | ResetRecord
    | UserMessageRecord
    | AssistantMessageRecord
    | ToolResultRecord
    | NoteRecord
    | DamagedRecord
)
RECORD_TYPES: tuple[type[RecordStruct], ...] = (
    StartRecord,
    ResetRecord,
    UserMessageRecord,
    AssistantMessageRecord,
    ToolResultRecord,
    NoteRecord,
    DamagedRecord,
)

_ENCODER = msgspec.json.Encoder()
_DECODER: msgspec.json.Decoder[HistoryRecord] = msgspec.json.Decoder(HistoryRecord)


def encode_record_line(record: HistoryRecord) -> bytes:
    """The record as its line of history.jsonl (compact UTF-8 JSON and a newline); a
    value JSON cannot hold is refused (``ValueError``) before anything is written."""
    try:
        return _ENCODER.encode(record) + b"\n"
    except TypeError as exc:
        raise ValueError(f"record cannot be stored as JSONL: {exc}") from exc


def decode_record(line: bytes) -> HistoryRecord | None:
    """The typed record a line holds, or None if it is no record of a known type or
    does not match its type."""
    try:
        return _DECODER.decode(line)
    except msgspec.DecodeError:  # a ValidationError is one
        return None


def parse_record(raw: Mapping[str, Any]) -> HistoryRecord | None:
    """The typed record a line already read as JSON holds (see ``decode_record``)."""
    try:
        record: HistoryRecord = msgspec.convert(raw, HistoryRecord)
    except msgspec.ValidationError:
        return None
    return record
