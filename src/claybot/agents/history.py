"""History records (``history.jsonl``) and rebuilding inference context from them.

Record types: ``start``, ``reset``, ``user_message``, ``assistant_message``,
``tool_result``, ``note``; and ``damaged``, which stands in for a line of the file
that is no JSON object (shown to readers, never to the model). ``start`` carries
the agent's descriptor, so a damaged ``descriptor.json`` can be rebuilt from it.
Times (``at``) are unix milliseconds. Records of one turn carry the inbound
``messageId``; the turn's last assistant record has ``final: true``, which is
what marks the message done.

The builders make the typed records of ``records.py``, which the stores write as
they are (seed 001's bytes); readers decode lines back into them. The API's pages
show the lines as read (``RawRecord``), unknown types and extra fields included.
``record_to_message`` gives the context entry a record stands for, used both when
context is rebuilt from history and by the turn loop as it appends, so the two
cannot drift apart.

Everything here is pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import orjson

from claybot.agents.packed_context import PackedContext
from claybot.agents.records import (
    UNSET,
    AssistantMessageRecord,
    DamagedRecord,
    HistoryRecord,
    NoteRecord,
    ResetRecord,
    StartRecord,
    TokenCounts,
    TokenUsageRecord,
    ToolOutput,
    ToolResultRecord,
    UserMessageRecord,
    decode_record,
)
from claybot.durable.jsonl import parse_line
from claybot.files.placement import PlacedFile
from claybot.files.reference import FileReference
from claybot.providers.base import (
    AssistantMessage,
    Attachment,
    ChatMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

# A line as read, before it is typed: what the API's pages show (the file as it is).
# A dict on purpose, not a struct: the page keeps the fields and record types this
# engine does not know (a newer engine's, a hand edit), which a struct would drop.
RawRecord = dict[str, Any]
MARKER_TYPES = frozenset({"start", "reset"})
MARKERS = (StartRecord, ResetRecord)
# Records of an inbound message's turn: they carry its ``messageId``.
TURN_RECORDS = (ResetRecord, UserMessageRecord, AssistantMessageRecord, ToolResultRecord)


def start_record(at: int, descriptor: dict[str, Any] | None = None) -> StartRecord:
    return StartRecord(at=at, descriptor=UNSET if descriptor is None else descriptor)


DAMAGED_RAW_CHARS = 500


def damaged_record(line: int, raw: bytes) -> DamagedRecord:
    """What a reader gets for a line of history.jsonl that is no record."""
    return DamagedRecord(
        line=line,
        raw=raw[:DAMAGED_RAW_CHARS].decode(errors="replace"),
        error=f"line {line} of history.jsonl is not a JSON object; it is left as it is "
        "and the model does not see it",
    )


def damaged_placeholder(line: int, raw: bytes) -> RawRecord:
    """``damaged_record`` as a page shows it, in place of the line (``jsonl.Placeholder``):
    a dict (``RawRecord``), as every line the page shows is."""
    data: RawRecord = msgspec.to_builtins(damaged_record(line, raw))
    return data


def reset_record(at: int, message_id: str, message: str | None = None) -> ResetRecord:
    return ResetRecord(at=at, messageId=message_id, message=message or UNSET)


def user_message_record(
    at: int,
    text: str,
    message_id: str,
    *,
    origin: str | None = None,
    files: Sequence[PlacedFile] = (),
) -> UserMessageRecord:
    """``files``: the message's file references, each with the ``path`` the agent
    reads it at, or the ``problem`` that kept it out (seed 001's ``FileReference``)."""
    return UserMessageRecord(
        at=at, messageId=message_id, text=text, files=list(files), origin=origin or UNSET
    )


def assistant_message_record(
    at: int,
    text: str,
    message_id: str,
    *,
    tool_calls: Sequence[ToolCall] = (),
    usage: TokenUsage | None = None,
    provider: str | None = None,
    model: str | None = None,
    final: bool,
    outgoing_id: str | None = None,
    error: bool = False,
    files: Sequence[FileReference] = (),
    tool_call_id: str | None = None,
) -> AssistantMessageRecord:
    """``files`` and ``tool_call_id``: a message a tool sent (``send_file``), its text the
    files' caption; it is not context (the call's result tells the model)."""
    tokens = None
    if usage is not None:
        size = TokenCounts(
            usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total
        )
        tokens = TokenUsageRecord(provider, model, size)
    return AssistantMessageRecord(
        at=at,
        messageId=message_id,
        text=text,
        files=[file.to_dict() for file in files] if files else [],
        toolCalls=list(tool_calls),
        tokens=tokens,
        final=final,
        outgoingId=outgoing_id or UNSET,
        error=True if error else UNSET,
        toolCallId=tool_call_id or UNSET,
    )


def tool_result_record(
    at: int, message_id: str, call: ToolCall, text: str, *, is_error: bool
) -> ToolResultRecord:
    return ToolResultRecord(
        at=at,
        messageId=message_id,
        toolCallId=call.id,
        toolName=call.name,
        output=ToolOutput(text, is_error),
    )


def note_record(at: int, text: str) -> NoteRecord:
    return NoteRecord(at=at, text=text)


# Record types the model sees as a message (the others are markers, notes, damage).
CONTEXT_TYPES = frozenset({"user_message", "assistant_message", "tool_result"})
CONTEXT_RECORDS = (UserMessageRecord, AssistantMessageRecord, ToolResultRecord)
# Records whose message id a retried post or a repeated /reset is recognised by.
REMEMBERED_TYPES = ("user_message", "reset")
REMEMBERED_RECORDS = (UserMessageRecord, ResetRecord)
_REMEMBERED_MARKS = tuple(f'"{kind}"'.encode() for kind in REMEMBERED_TYPES)


@dataclass(frozen=True)
class HistoryTail:
    """What loading an agent needs of its history, taken from the end of the file."""

    records: list[HistoryRecord]  # oldest first: from the last marker, or enough for the context
    message_ids: list[str]  # the newest user messages' and resets' ids, oldest first


def history_tail(
    lines_newest_first: Iterable[bytes], *, context_records: int, message_ids: int
) -> HistoryTail:
    """The records the context is built from, back to the last ``start`` or ``reset``
    marker or to ``context_records`` records the model sees, whichever comes first;
    and the ids of the last ``message_ids`` user messages and resets. Lines are read
    only as far back as those two need: at 100,000 records, a few thousand. A line
    that is no record is left out (it is never context), but one that only fails to
    match its type still counts by its ``type`` (a marker ends the context, a message
    takes its place in it, its id is remembered), as it always did; only lines that
    can hold a remembered id are decoded beyond the context."""
    records: list[HistoryRecord] = []
    ids: list[str] = []
    in_context = True
    seen = 0  # context records taken
    for line in lines_newest_first:
        if not in_context and len(ids) >= message_ids:
            break
        record: HistoryRecord | None = None
        tried = False
        if in_context:
            record, tried = decode_record(line), True
            if record is not None:
                records.append(record)
                if isinstance(record, MARKERS):
                    in_context = False
                elif isinstance(record, CONTEXT_RECORDS):
                    seen += 1
                    in_context = seen < context_records
            else:
                kind = _raw_type(line)
                if kind in MARKER_TYPES:
                    in_context = False
                elif kind in CONTEXT_TYPES:
                    seen += 1
                    in_context = seen < context_records
        if len(ids) < message_ids and any(mark in line for mark in _REMEMBERED_MARKS):
            if not tried:
                record = decode_record(line)
            message_id = _remembered_id(record, line)
            if message_id:
                ids.append(message_id)
    records.reverse()
    ids.reverse()
    return HistoryTail(records, ids)


def _raw_type(line: bytes) -> object:
    """The ``type`` of a line that is no record it names (or None)."""
    raw = parse_line(line)
    return raw.get("type") if raw is not None else None


def _remembered_id(record: HistoryRecord | None, line: bytes) -> str | None:
    """The id a user message or reset is recognised by; from the line as JSON when it
    does not match its type (as it always was)."""
    if record is not None:
        return record.messageId or None if isinstance(record, REMEMBERED_RECORDS) else None
    raw = parse_line(line)
    if raw is None or raw.get("type") not in REMEMBERED_TYPES or not raw.get("messageId"):
        return None
    return str(raw["messageId"])


def since_last_marker(records: Sequence[HistoryRecord]) -> Sequence[HistoryRecord]:
    """The records after the most recent ``start`` or ``reset`` marker (inclusive)."""
    for index in range(len(records) - 1, -1, -1):
        if isinstance(records[index], MARKERS):
            return records[index:]
    return records


def user_message(
    text: str, origin: str | None = None, files: Sequence[dict[str, Any]] = ()
) -> UserMessage:
    """A user message as the model sees it: a message nobody typed says who sent it,
    and each file it carries is named with the path the agent may read it at."""
    if origin:
        text = f'<system_message origin="{origin}">{text}</system_message>'
    attached = attachments(files)
    notes = [
        f"[Attached file: {file.name} ({file.mime_type}, {file.size} bytes) at {file.path}]"
        for file in attached
    ]
    notes += [
        f"[Attached file: {file.get('name') or 'file'}: {file['problem']}]"
        for file in files
        if isinstance(file, dict) and isinstance(file.get("problem"), str)
    ]
    if notes:
        joined = "\n".join(notes)
        text = f"{text}\n\n{joined}" if text else joined
    return UserMessage(text, attached)


def attachments(files: Sequence[dict[str, Any]]) -> tuple[Attachment, ...]:
    """File references as the model gets them: those with a path the agent can read."""
    found = []
    for file in files:
        if isinstance(file, dict) and isinstance(file.get("path"), str):
            found.append(
                Attachment(
                    str(file.get("name") or "file"),
                    str(file.get("mimeType") or "application/octet-stream"),
                    int(file.get("size") or 0),
                    file["path"],
                )
            )
    return tuple(found)


def assistant_message(text: str, tool_calls: Sequence[ToolCall] = ()) -> AssistantMessage:
    return AssistantMessage(text, tuple(tool_calls))


def tool_message(call: ToolCall, text: str, *, is_error: bool) -> ToolMessage:
    return ToolMessage(call.id, call.name, text, is_error)


def record_to_message(record: HistoryRecord) -> ChatMessage | None:
    """One history record as inference context, or None if it is not context."""
    if isinstance(record, UserMessageRecord):
        return user_message(record.text, record.origin or None, record.files)
    if isinstance(record, AssistantMessageRecord):
        if record.toolCallId:
            return None  # a tool's message: its call and result are the context
        return assistant_message(record.text, record.toolCalls)
    if isinstance(record, ToolResultRecord):
        call = ToolCall(record.toolCallId, record.toolName, {})
        return tool_message(call, record.output.text, is_error=record.output.isError)
    if isinstance(record, ResetRecord) and record.message:
        return UserMessage(f"<system_message>{record.message}</system_message>")
    return None


def build_context(records: Iterable[HistoryRecord]) -> PackedContext:
    """Inference context from records already cut at the last marker (what is no
    context, a note or damage, is left out)."""
    context = PackedContext()
    for record in records:
        message = record_to_message(record)
        if message is not None:
            context.append(message)
    return context


class Sent(NamedTuple):
    """An outgoing message of a turn, as its history records it."""

    id: str
    text: str
    final: bool
    files: tuple[FileReference, ...] = ()


@dataclass
class TurnProgress:
    """What history says about one inbound message's turn."""

    started: bool = False
    done: bool = False
    failed: bool = False  # the turn ended with an error record
    outgoing: list[Sent] = field(default_factory=list)
    unanswered_calls: list[ToolCall] = field(default_factory=list)


def message_id_of(record: HistoryRecord) -> str | None:
    """The inbound message a record belongs to, if it belongs to one."""
    return record.messageId if isinstance(record, TURN_RECORDS) else None


def of_turn(records: Iterable[HistoryRecord], message_id: str) -> list[HistoryRecord]:
    """The records of one message's turn (they carry its id), in order."""
    return [record for record in records if message_id_of(record) == message_id]


def turn_records(lines_newest_first: Iterable[bytes], message_id: str) -> list[HistoryRecord]:
    """The records of one message's turn, read back from the end of the history only
    as far as its ``user_message`` (where a turn starts; a reset is its one record);
    a line is decoded only when it holds the id's JSON text. An id used again after it
    left the remembered window gives its latest turn. A line of the turn that does
    not match its type is left out, but a user message or reset still ends the search."""
    needle = orjson.dumps(message_id)
    found: list[HistoryRecord] = []
    for line in lines_newest_first:
        if needle not in line:
            continue
        record = decode_record(line)
        if record is None:
            raw = parse_line(line)
            if (
                raw is not None
                and raw.get("messageId") == message_id
                and raw.get("type") in REMEMBERED_TYPES
            ):
                break
            continue
        if message_id_of(record) != message_id:
            continue
        found.append(record)
        if isinstance(record, REMEMBERED_RECORDS):  # a message's turn starts here
            break
    found.reverse()
    return found


def turn_progress(records: Iterable[HistoryRecord], message_id: str) -> TurnProgress:
    progress = TurnProgress()
    answered: set[str] = set()
    pending: list[ToolCall] = []
    for record in records:
        if message_id_of(record) != message_id:
            continue
        if isinstance(record, UserMessageRecord):
            progress.started = True
        elif isinstance(record, AssistantMessageRecord):
            if record.outgoingId:
                files = _references(record.files)
                progress.outgoing.append(Sent(record.outgoingId, record.text, record.final, files))
            pending.extend(record.toolCalls)
            if record.final:
                progress.done = True
                progress.failed = record.error is True
        elif isinstance(record, ToolResultRecord):
            answered.add(record.toolCallId)
    progress.unanswered_calls = [call for call in pending if call.id not in answered]
    return progress


def _references(files: Sequence[Any]) -> tuple[FileReference, ...]:
    """The file references a record carries (one that is malformed is left out)."""
    found = []
    for file in files:
        if isinstance(file, dict):
            try:
                found.append(FileReference.from_dict(file))
            except (KeyError, TypeError, ValueError):
                continue
    return tuple(found)
