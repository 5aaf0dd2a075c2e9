"""History records as types: one pydantic model per line type of ``history.jsonl``.

``HistoryRecord`` is a union discriminated on ``type``. The runtime reads history
through it (``parse_record``): context rebuilding, turn recovery and the API's
history page all see the same typed records, and the page's schema is these models.

A line that does not match its type (a hand edit, a newer engine's record) parses
to ``None`` here: the model never sees it, and the API still shows it as it is.
Extra fields are kept (``extra="allow"``), so a record an older engine reads is
never cut down when it is passed on.

The builders in ``history.py`` write the same shapes as plain dicts (the writer's
hot path serializes dicts with orjson, which is several times cheaper than building
and dumping a model per line); ``tests/agents/test_records.py`` holds every
builder's output to its model, field for field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.json_schema import SkipJsonSchema

from claybot.agents.descriptors import AgentDescriptor

AT = Field(description="Unix milliseconds")
# A field a record leaves out rather than writing null: optional, never null.
Absent = SkipJsonSchema[None]


class RecordModel(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class StartRecord(RecordModel):
    """The agent's first record; it carries the descriptor, so a lost descriptor.json is
    rebuilt from it."""

    type: Literal["start"]
    at: int = AT
    descriptor: AgentDescriptor | Absent = None


class ResetRecord(RecordModel):
    """The context was cleared here; the model sees nothing before it."""

    type: Literal["reset"]
    at: int = AT
    messageId: str
    message: str | Absent = Field(default=None, description="Said to the agent after the reset")


class UserMessageRecord(RecordModel):
    type: Literal["user_message"]
    at: int = AT
    messageId: str
    text: str
    files: list[Any] = Field(default_factory=list, description="File references (FileReference)")
    origin: str | Absent = Field(
        default=None, description="Who posted it when no person did: `cron`, a subagent, …"
    )


class ToolCallRecord(RecordModel):
    id: str
    name: str
    arguments: dict[str, Any]


class TokenCounts(RecordModel):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    total: int


class TokenUsageRecord(RecordModel):
    provider: str | None
    model: str | None
    size: TokenCounts


class AssistantMessageRecord(RecordModel):
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


class ToolOutput(RecordModel):
    text: str
    isError: bool


class ToolResultRecord(RecordModel):
    type: Literal["tool_result"]
    at: int = AT
    messageId: str
    toolCallId: str
    toolName: str
    output: ToolOutput


class NoteRecord(RecordModel):
    type: Literal["note"]
    at: int = AT
    text: str


class DamagedRecord(RecordModel):
    """A line of history.jsonl that is no JSON object: shown, never given to the model."""

    type: Literal["damaged"]
    line: int
    raw: str = Field(description="The line's first 500 bytes")
    error: str


HistoryRecord = Annotated[
    StartRecord
    | ResetRecord
    | UserMessageRecord
    | AssistantMessageRecord
    | ToolResultRecord
    | NoteRecord
    | DamagedRecord,
    Field(discriminator="type"),
]
RECORD_TYPES: tuple[type[RecordModel], ...] = (
    StartRecord,
    ResetRecord,
    UserMessageRecord,
    AssistantMessageRecord,
    ToolResultRecord,
    NoteRecord,
    DamagedRecord,
)
RECORD_ADAPTER: TypeAdapter[HistoryRecord] = TypeAdapter(HistoryRecord)


def parse_record(raw: Mapping[str, Any]) -> HistoryRecord | None:
    """The typed record a history line holds, or None if it is of no known type or
    does not match its type."""
    try:
        return RECORD_ADAPTER.validate_python(raw)
    except ValidationError:
        return None
