"""An agent's history as the API pages it: ``history.jsonl``'s records, each numbered.

The records are the agents layer's msgspec structs (``agents/records.py``), which
the runtime builds, writes and reads. The page answers the file's lines as read, so
its models here are pydantic mirrors of those structs, field for field and in their
order, with the record's number, ``seq``, first (``tests/api/test_history_models.py``
holds each mirror to its struct); the route checks them strictly so the answer is the
file's bytes. Unlike the structs they keep fields they do not know (``extra="allow"``):
a page shows a newer engine's field, or a hand edit's, as it is. A page can also hold
a record of a type this engine does not know: it is answered as ``OtherRecord``,
never refused. What the original ClayBot dashboard reads is added beside the file's
fields (``claybot.wire.history_view``): a tool result's ``toolMessage`` and ``files``,
and each file reference's ``path``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from claybot.agents.descriptors import AgentDescriptor
from claybot.wire.base import Answer, Ok

SEQ = Field(description="The record's number in the history, from 0")
AT = Field(description="Unix milliseconds")
# A field a record leaves out rather than writing null: optional, never null (``UNSET``).
Absent = SkipJsonSchema[None]


class Numbered(Answer):
    seq: int = SEQ


class RecordMirror(Numbered):
    """A record as a page answers it: checked strictly, unknown fields kept."""

    model_config = ConfigDict(strict=True, extra="allow")


class StartRecord(RecordMirror):
    """The agent's first record; it carries the descriptor, so a lost descriptor.json is
    rebuilt from it."""

    type: Literal["start"]
    at: int = AT
    descriptor: AgentDescriptor | Absent = None


class ResetRecord(RecordMirror):
    """The context was cleared here; the model sees nothing before it."""

    type: Literal["reset"]
    at: int = AT
    messageId: str
    message: str | Absent = Field(default=None, description="Said to the agent after the reset")


class UserMessageRecord(RecordMirror):
    type: Literal["user_message"]
    at: int = AT
    messageId: str
    text: str
    files: list[Any] = Field(default_factory=list, description="File references (FileReference)")
    origin: str | Absent = Field(
        default=None, description="Who posted it when no person did: `cron`, a subagent, …"
    )


class ToolCallRecord(Answer):
    model_config = ConfigDict(strict=True, extra="allow")
    id: str
    name: str
    arguments: dict[str, Any]


class TokenCounts(Answer):
    model_config = ConfigDict(strict=True, extra="allow")
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    total: int


class TokenUsageRecord(Answer):
    model_config = ConfigDict(strict=True, extra="allow")
    provider: str | None
    model: str | None
    size: TokenCounts


class AssistantMessageRecord(RecordMirror):
    type: Literal["assistant_message"]
    at: int = AT
    messageId: str = Field(description="The inbound message this answers")
    text: str
    files: list[Any] = Field(default_factory=list, description="File references (FileReference)")
    toolCalls: list[ToolCallRecord] = Field(default_factory=list)
    tokens: TokenUsageRecord | None = None
    final: bool = Field(description="The turn's last record: the message is done")
    outgoingId: str | Absent = Field(default=None, description="The reply delivered, if any")
    error: bool | Absent = Field(default=None, description="The turn ended in an error")
    toolCallId: str | Absent = Field(
        default=None,
        description="The tool call that sent this message (send_file: `files`, captioned by "
        "`text`); not context: the call's result tells the model",
    )


class TextContent(Answer):
    type: Literal["text"]
    text: str


class ToolMessage(Answer):
    """The tool result as a message to the model, as the original ClayBot kept it."""

    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: list[TextContent] = Field(description="The tool's text (as `output.text`)")
    isError: bool
    timestamp: int = Field(description="Unix milliseconds (the record's `at`)")


class ToolResultOutput(Answer):
    """The tool's text, with what the original ClayBot dashboard reads beside it."""

    text: str
    isError: bool
    toolMessage: ToolMessage
    files: list[Any] = Field(description="Files the tool returned (none do: `[]`)")


class ToolResultRecord(RecordMirror):
    type: Literal["tool_result"]
    at: int = AT
    messageId: str
    toolCallId: str
    toolName: str
    output: ToolResultOutput  # the record's output (``ToolOutput``), with more


class NoteRecord(RecordMirror):
    type: Literal["note"]
    at: int = AT
    text: str


class DamagedRecord(RecordMirror):
    """A line of history.jsonl that is no JSON object: shown, never given to the model."""

    type: Literal["damaged"]
    line: int
    raw: str = Field(description="The line's first 500 bytes")
    error: str


class OtherRecord(Numbered):
    """A record of a type this engine does not know, or one that does not match its type."""

    # Whatever the file holds (even no type at all): a page is never refused for a record.
    type: Any = None


# Tried in order (a record that does not match its own type falls through to
# OtherRecord), so the union is not discriminated on ``type``.
HistoryRecord = Annotated[
    StartRecord
    | ResetRecord
    | UserMessageRecord
    | AssistantMessageRecord
    | ToolResultRecord
    | NoteRecord
    | DamagedRecord
    | OtherRecord,
    Field(union_mode="left_to_right"),
]


class AgentHistory(Ok):
    agentId: str
    total: int = Field(description="Records in the whole history")
    records: list[HistoryRecord]
