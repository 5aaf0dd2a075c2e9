"""The OpenAI-compatible door's answers: OpenAI's shapes, plus the ``claybot`` extension.

The fields are OpenAI's, so its SDKs read them as their own types; the extension is
a field OpenAI does not have (the SDKs keep it: ``model_extra["claybot"]``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from claybot.wire.base import Answer, Omitted


class AssistantMessage(Answer):
    role: Literal["assistant"]
    content: str = Field(description="The turn's replies, joined by a blank line")


class Choice(Answer):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop"]


class CompletionUsage(Answer):
    """The tokens of the turn's model calls (zeros where a provider counts none)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ToolOutcome(Answer):
    text: str
    isError: bool


class ToolUse(Answer):
    """A tool the agent called in ClayBot during the turn (never for the client to run)."""

    id: str
    name: str
    arguments: str = Field(description="The arguments, as JSON")
    result: ToolOutcome | Omitted = Field(
        default=None, description="Left out while the call has no result"
    )


class TurnExtension(Answer):
    agentId: str
    messageId: str = Field(description="The message the turn answers, in the agent's history")
    newMessage: bool = Field(
        description="False: the request repeated messages the agent held, and this is "
        "the reply of their turn"
    )
    failed: bool = Field(description="The turn ended in an error (its text says which)")
    toolCalls: list[ToolUse]


class ChatCompletion(Answer):
    id: str
    object: Literal["chat.completion"]
    created: int = Field(description="Unix seconds")
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    claybot: TurnExtension


class AgentModel(Answer):
    agentId: str
    owner: str = Field(description="The API key id whose agent it is (`socket`: the owner's)")
    user: str = Field(description="The `user` of the requests that made it (`default`: none)")


class ModelInfo(Answer):
    id: str = Field(description="`claybot`, or `agent:<agentId>`")
    object: Literal["model"]
    created: int = Field(description="Unix seconds")
    owned_by: str
    claybot: AgentModel | Omitted = None


class ModelList(Answer):
    object: Literal["list"]
    data: list[ModelInfo]


class OpenAIErrorDetail(BaseModel):
    message: str = Field(description="What went wrong, for people")
    type: str = Field(
        description="invalid_request_error, authentication_error, permission_error, "
        "rate_limit_error or server_error"
    )
    param: str | None = Field(description="The body field to blame, if one is")
    code: str = Field(description="What went wrong, for programs: `model_not_found`, …")


class OpenAIError(BaseModel):
    """OpenAI's error body, on the OpenAI-compatible door (see ``api/openai_errors.py``)."""

    error: OpenAIErrorDetail
