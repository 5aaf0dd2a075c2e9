"""The one interface every inference provider implements.

Messages and tool schemas go in; text, tool calls and token usage come out. The
agent loop only sees these types and never imports a vendor SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeGuard, get_args, runtime_checkable

import msgspec
from typing_extensions import TypedDict

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings


class ToolCallJson(TypedDict):
    """A tool call as history records keep it."""

    id: str
    name: str
    arguments: dict[str, Any]  # the JSON object the model sent, before the tool validates it


class ToolCall(msgspec.Struct, frozen=True):
    """A call the model made. History records carry it as it is (an assistant message's
    ``toolCalls``: ``agents/records.py``), so its fields are seed 001's, in its order."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_dict(self) -> ToolCallJson:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


class Attachment(msgspec.Struct, frozen=True, array_like=True):
    """A file a user message carries, as the model gets it: where the agent may read it
    (the text says so), and for an image, its bytes as an image part where the
    provider takes images."""

    name: str
    mime_type: str
    size: int
    path: str

    @property
    def is_image(self) -> bool:
        return is_image_type(self.mime_type)


# What vision models take as image parts (OpenAI and Anthropic alike).
ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
IMAGE_TYPES: frozenset[str] = frozenset(get_args(ImageType))


def is_image_type(mime_type: str) -> TypeGuard[ImageType]:
    return mime_type in IMAGE_TYPES


# The messages of the inference context: what a history record is to the model
# (``agents/history.py``'s ``record_to_message``). A union tagged on ``role``, so each
# carries only what its kind has: a tool result always names its call. Array-like,
# because an agent's context keeps them packed as JSON (``agents/packed_context.py``).
class UserMessage(msgspec.Struct, frozen=True, array_like=True, tag_field="role", tag="user"):
    role: ClassVar[Literal["user"]] = "user"
    text: str
    files: tuple[Attachment, ...] = ()


class AssistantMessage(
    msgspec.Struct, frozen=True, array_like=True, tag_field="role", tag="assistant"
):
    role: ClassVar[Literal["assistant"]] = "assistant"
    text: str
    tool_calls: tuple[ToolCall, ...] = ()


class ToolMessage(msgspec.Struct, frozen=True, array_like=True, tag_field="role", tag="tool"):
    """The result of the tool call ``tool_call_id``."""

    role: ClassVar[Literal["tool"]] = "tool"
    tool_call_id: str
    tool_name: str
    text: str
    is_error: bool = False


ChatMessage = UserMessage | AssistantMessage | ToolMessage


@dataclass(frozen=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True)
class TokenUsage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": self.total,
        }


@dataclass(frozen=True)
class InferenceRequest:
    messages: Sequence[ChatMessage]
    system_prompt: str = ""
    tools: Sequence[ToolSchema] = ()
    max_output_tokens: int | None = None


@dataclass(frozen=True)
class InferenceResult:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: TokenUsage = field(default_factory=TokenUsage)
    provider_id: str = ""
    model: str = ""
    # The model stopped because it reached its output token limit: the text is cut off.
    cut_off: bool = False


# Called with each piece of text as the model writes it (a streaming call). It must
# be cheap and never raise: it runs between the chunks of a network read.
DeltaSink = Callable[[str], None]


class ProviderError(Exception):
    """A provider could not answer; the router tries the next one."""

    def __init__(self, provider_id: str, message: str) -> None:
        super().__init__(f"{provider_id}: {message}")
        self.provider_id = provider_id
        self.reason = message  # without the provider's id, for messages that name it already


def failure_reason(exc: BaseException) -> str:
    """Why a provider call (or a provider's creation) failed, without the provider's id."""
    if isinstance(exc, ProviderError):
        return exc.reason
    return str(exc) or type(exc).__name__


class ProviderConfigError(ProviderError):
    """The provider's settings or credentials are unusable (tell the user)."""


@runtime_checkable
class InferenceProvider(Protocol):
    """A configured, ready-to-call model endpoint."""

    @property
    def id(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def model(self) -> str: ...

    async def complete(
        self, request: InferenceRequest, on_delta: DeltaSink | None = None
    ) -> InferenceResult:
        """Answer ``request``; with ``on_delta``, stream: each piece of the answer's text
        goes to it as it comes (a provider that cannot stream sends none: the result
        carries the text)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class ImageProvider(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def label(self) -> str: ...

    async def generate(self, prompt: str, *, size: str | None = None) -> list[bytes]: ...


@dataclass(frozen=True)
class Endpoint:
    """Where a provider's requests go, and with which key."""

    base_url: str | None  # None: the vendor's own API
    key: str
    # Where the key came from ("auth.json", "$OPENAI_API_KEY"), for `claybot doctor`;
    # "" when the endpoint needs none and gets a placeholder.
    key_source: str = ""


# How a provider type builds a provider: its settings, its auth.json entry, and the
# environment the engine was given (keys and URLs such as OPENAI_API_KEY), passed in
# rather than read from os.environ so an engine (or a test) decides what a provider sees.
ProviderFactory = Callable[
    [ProviderSettings, AuthEntry | None, Mapping[str, str]], InferenceProvider
]
# The same inputs to where requests would go (``base_url`` filled in) and with which key,
# worked out without building the provider or sending anything; raises
# ProviderConfigError when there is no key. `claybot doctor` checks keys and
# reachability with it, so it never pays for a model call.
EndpointLocator = Callable[[ProviderSettings, AuthEntry | None, Mapping[str, str]], Endpoint]


@dataclass(frozen=True)
class ProviderType:
    type: str
    label: str
    create: ProviderFactory
    needs_auth: bool = False
    description: str = ""
    locate: EndpointLocator | None = None  # None: no network endpoint (local, scripted)
