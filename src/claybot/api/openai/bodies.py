"""The OpenAI-compatible door's request body, as OpenAI clients send it.

Unlike the engine's own bodies (``wire/bodies.py``), unknown fields are accepted and
ignored: clients send whatever their version of the API has (``temperature``,
``max_tokens``, ``response_format``, ``tools``, ...), and the agent runs with its own
model settings and its own tools in ClayBot. What the door reads is declared, with
strict JSON types, so a ``"stream": "yes"`` is refused rather than guessed at.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class ImageUrl(_Lenient):
    url: str = Field(
        description="A `data:image/...;base64,` URL; web addresses are refused, never fetched"
    )
    detail: str | None = Field(default=None, description="Ignored")


class ContentPart(_Lenient):
    """A part of a message's content: ``text``, or an ``image_url`` given as a data URL
    (stored in the file store and carried by the message, as an upload is)."""

    type: str = Field(description="`text` or `image_url`; other kinds (audio, files) are refused")
    text: str | None = None
    image_url: ImageUrl | None = None


class ChatMessage(_Lenient):
    role: Role = Field(
        description="Only `user` messages are said to the agent; see the route's description"
    )
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(_Lenient):
    include_usage: bool | None = Field(
        default=None, description="End the stream with a chunk that holds the turn's usage"
    )


class ChatCompletionRequest(_Lenient):
    model: str = Field(
        min_length=1,
        max_length=256,
        description="`claybot` (your own agent; `user` chooses which), or `agent:<agentId>` "
        "(one listed by GET /v1/models)",
    )
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = Field(
        default=None,
        max_length=1024,
        description="With model `claybot`: whose agent, among those of this API key "
        "(default: one agent per key)",
    )
    n: int | None = Field(default=None, ge=1, le=1, description="One answer: the agent's")
    tools: list[Any] | None = Field(
        default=None, description="Ignored: the agent's own tools run in ClayBot"
    )
