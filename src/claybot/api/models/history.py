"""An agent's history as the API pages it: ``history.jsonl``'s records, each numbered.

Records are what the runtime wrote (``agents/history.py`` builds them), so a page
can hold a record of a type this engine does not know (a newer engine wrote it, or
a hand edit changed one): it is answered as it is, as ``OtherRecord``, never refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from claybot.agents.descriptors import AgentDescriptor
from claybot.api.models.base import Answer, Ok, Omitted

AT = Field(description="Unix milliseconds")
SEQ = Field(description="The record's number in the history, from 0")


class StartRecord(Answer):
    """The agent's first record; it carries the descriptor, so a lost descriptor.json is
    rebuilt from it."""

    seq: int = SEQ
    type: Literal["start"]
    at: int = AT
    descriptor: AgentDescriptor | Omitted = None


class ResetRecord(Answer):
    """The context was cleared here; the model sees nothing before it."""

    seq: int = SEQ
    type: Literal["reset"]
    at: int = AT
    messageId: str
    message: str | Omitted = Field(default=None, description="Said to the agent after the reset")


class UserMessageRecord(Answer):
    seq: int = SEQ
    type: Literal["user_message"]
    at: int = AT
    messageId: str
    text: str
    files: list[Any] = Field(description="Attachments (none yet)")
    origin: str | Omitted = Field(
        default=None, description="Who posted it when no person did: `cron`, a subagent, …"
    )


class ToolCallRecord(Answer):
    id: str
    name: str
    arguments: dict[str, Any]


class TokenCounts(Answer):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    total: int


class TokenUsage(Answer):
    provider: str | None
    model: str | None
    size: TokenCounts


class AssistantMessageRecord(Answer):
    seq: int = SEQ
    type: Literal["assistant_message"]
    at: int = AT
    messageId: str = Field(description="The inbound message this answers")
    text: str
    files: list[Any] = Field(description="Attachments (none yet)")
    toolCalls: list[ToolCallRecord]
    tokens: TokenUsage | None
    final: bool = Field(description="The turn's last record: the message is done")
    outgoingId: str | Omitted = Field(default=None, description="The reply delivered, if any")
    error: bool | Omitted = Field(default=None, description="The turn ended in an error")


class ToolOutput(Answer):
    text: str
    isError: bool


class ToolResultRecord(Answer):
    seq: int = SEQ
    type: Literal["tool_result"]
    at: int = AT
    messageId: str
    toolCallId: str
    toolName: str
    output: ToolOutput


class NoteRecord(Answer):
    seq: int = SEQ
    type: Literal["note"]
    at: int = AT
    text: str


class DamagedRecord(Answer):
    """A line of history.jsonl that is no JSON object: shown, never given to the model."""

    seq: int = SEQ
    type: Literal["damaged"]
    line: int
    raw: str = Field(description="The line's first 500 bytes")
    error: str


class OtherRecord(Answer):
    """A record of a type this engine does not know, or one that does not match its type."""

    seq: int = SEQ
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
