"""An agent's history as the API pages it: ``history.jsonl``'s records, each numbered.

Each record model here is the agents layer's own (``agents/records.py``) with its
number, ``seq``, added; the route checks them strictly so the answer is the file's
bytes. A page can hold a record of a type this engine does not know (a newer
engine wrote it, or a hand edit changed one): it is answered as it is, as
``OtherRecord``, never refused. What the original ClayBot dashboard reads is added
beside the file's fields (``claybot.wire.history_view``): a tool result's ``toolMessage``
and ``files``, and each file reference's ``path``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from claybot.agents import records
from claybot.wire.base import Answer, Ok

SEQ = Field(description="The record's number in the history, from 0")


class Numbered(Answer):
    seq: int = SEQ


# Numbered comes last among the bases so that ``seq`` is the first field, as the
# engine has always written it; the answer is checked strictly (see ``Answer``).
class StartRecord(records.StartRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)


class ResetRecord(records.ResetRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)


class UserMessageRecord(records.UserMessageRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)


class AssistantMessageRecord(records.AssistantMessageRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)


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


class ToolResultOutput(records.ToolOutput, Answer):
    """The tool's text, with what the original ClayBot dashboard reads beside it."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=False)
    toolMessage: ToolMessage
    files: list[Any] = Field(description="Files the tool returned (none do: `[]`)")


class ToolResultRecord(records.ToolResultRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)
    output: ToolResultOutput  # the record's output, with more


class NoteRecord(records.NoteRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)


class DamagedRecord(records.DamagedRecord, Numbered):
    model_config = ConfigDict(strict=True, extra="allow", frozen=False)


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
