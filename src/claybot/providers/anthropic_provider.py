"""Anthropic's Messages API through the official ``anthropic`` SDK.

The SDK is imported when a provider is created, never when the engine boots.

Options (settings.json, camelCase): ``baseUrl``, ``timeoutS`` (60), ``maxRetries`` (1),
``temperature``, ``maxTokens`` (1024; the API requires a limit). The key is the auth
entry's ``apiKey``, else ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    DeltaSink,
    Endpoint,
    InferenceRequest,
    InferenceResult,
    ProviderError,
    ProviderType,
    TokenUsage,
    ToolCall,
    ToolSchema,
)
from claybot.providers.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    MAX_ERROR_CHARS,
    endpoint_of,
    option,
    redact,
    resolve_endpoint,
    vendor_message,
)

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message, RawMessageStreamEvent

DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TOKENS = 1024
VENDOR_HOST = "api.anthropic.com"
KEY_VARIABLE = "ANTHROPIC_API_KEY"
URL_VARIABLE = "ANTHROPIC_BASE_URL"
# The API refuses empty text blocks.
EMPTY_TEXT = "(empty)"


# -- our messages to the Messages API --------------------------------------------------------


def to_anthropic_messages(request: InferenceRequest) -> list[dict[str, Any]]:
    """Our messages as Anthropic turns.

    Tool results are ``tool_result`` blocks in a user turn; consecutive ones share
    that turn, because the API wants every result of one assistant turn together
    right after it.
    """
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.text,
            }
            if message.is_error:
                block["is_error"] = True
            if turns and turns[-1]["role"] == "user" and _only_tool_results(turns[-1]):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif message.role == "assistant":
            content: list[dict[str, Any]] = []
            if message.text.strip():
                content.append({"type": "text", "text": message.text})
            content.extend(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                for call in message.tool_calls
            )
            if content:  # an empty assistant turn would be refused; it said nothing anyway
                turns.append({"role": "assistant", "content": content})
        else:
            text = {"type": "text", "text": message.text if message.text.strip() else EMPTY_TEXT}
            if turns and turns[-1]["role"] == "user":
                turns[-1]["content"].append(text)  # text may follow tool results in one turn
            else:
                turns.append({"role": "user", "content": [text]})
    return turns


def _only_tool_results(turn: dict[str, Any]) -> bool:
    return all(block["type"] == "tool_result" for block in turn["content"])


def to_anthropic_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


# -- the response back to ours ------------------------------------------------------------


def from_anthropic_response(provider_id: str, model: str, response: Message) -> InferenceResult:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        # Thinking and server-tool blocks are the vendor's business; we keep text and calls.
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {"_raw": block.input}
            calls.append(ToolCall(block.id, block.name, dict(arguments)))
    usage = response.usage
    return InferenceResult(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=TokenUsage(
            input=usage.input_tokens or 0,
            output=usage.output_tokens or 0,
            cache_read=usage.cache_read_input_tokens or 0,
            cache_write=usage.cache_creation_input_tokens or 0,
        ),
        provider_id=provider_id,
        model=response.model or model,
        cut_off=response.stop_reason == "max_tokens",
    )


class StreamedMessage:
    """A streamed answer put back together from its events: text as it comes (to
    ``on_delta``), each tool call from its block's JSON pieces, usage from the start
    (input) and the end (output) of the message."""

    def __init__(self, on_delta: DeltaSink) -> None:
        self._on_delta = on_delta
        self._text: list[str] = []
        self._calls: dict[int, tuple[str, str, list[str]]] = {}  # index: id, name, JSON
        self._usage = TokenUsage()
        self._stop_reason: str | None = None
        self._model = ""

    def add(self, event: RawMessageStreamEvent) -> None:
        if event.type == "message_start":
            usage = event.message.usage
            self._model = event.message.model
            self._usage = TokenUsage(
                input=usage.input_tokens or 0,
                output=usage.output_tokens or 0,
                cache_read=usage.cache_read_input_tokens or 0,
                cache_write=usage.cache_creation_input_tokens or 0,
            )
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self._calls[event.index] = (block.id, block.name, [])
            elif block.type == "text" and block.text:
                self._piece(block.text)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                self._piece(delta.text)
            elif delta.type == "input_json_delta" and event.index in self._calls:
                self._calls[event.index][2].append(delta.partial_json)
        elif event.type == "message_delta":
            self._stop_reason = event.delta.stop_reason or self._stop_reason
            self._usage = replace(self._usage, output=event.usage.output_tokens or 0)

    def _piece(self, text: str) -> None:
        self._text.append(text)
        self._on_delta(text)

    def result(self, provider_id: str, model: str) -> InferenceResult:
        calls = []
        for _, (call_id, name, pieces) in sorted(self._calls.items()):
            raw = "".join(pieces) or "{}"
            try:
                arguments = json.loads(raw)
            except ValueError:
                arguments = {"_raw": raw}
            calls.append(
                ToolCall(call_id, name, arguments if isinstance(arguments, dict) else {"_raw": raw})
            )
        return InferenceResult(
            text="".join(self._text),
            tool_calls=tuple(calls),
            usage=self._usage,
            provider_id=provider_id,
            model=self._model or model,
            cut_off=self._stop_reason == "max_tokens",
        )


def describe_error(exc: Exception, *, secret: str, endpoint: str) -> str:
    """What went wrong, in words the user can act on, and never the key."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        text = f"HTTP {exc.status_code}: {vendor_message(exc.body) or exc.message}"
    elif isinstance(exc, anthropic.APITimeoutError):
        text = f"no answer from {endpoint} in time (options.timeoutS)"
    elif isinstance(exc, anthropic.APIConnectionError):
        text = f"cannot reach {endpoint}: {exc.message}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return redact(text[:MAX_ERROR_CHARS], secret)


# -- the provider ---------------------------------------------------------------------------


def locate(settings: ProviderSettings, auth: AuthEntry | None, env: Mapping[str, str]) -> Endpoint:
    """Where this provider's requests go (the vendor's API unless configured) and its key."""
    endpoint = resolve_endpoint(
        settings,
        auth,
        env,
        vendor_host=VENDOR_HOST,
        key_variable=KEY_VARIABLE,
        url_variable=URL_VARIABLE,
    )
    return replace(endpoint, base_url=endpoint.base_url or f"https://{VENDOR_HOST}")


class AnthropicProvider:
    def __init__(
        self,
        settings: ProviderSettings,
        auth: AuthEntry | None,
        env: Mapping[str, str],
    ) -> None:
        import anthropic

        self._id = settings.id
        self._model = settings.model or DEFAULT_MODEL
        endpoint = locate(settings, auth, env)
        self._key = endpoint.key
        self._max_tokens = option(settings, "maxTokens", int, DEFAULT_MAX_TOKENS)
        self._temperature = option(settings, "temperature", float, None)
        self._client: anthropic.AsyncAnthropic = anthropic.AsyncAnthropic(
            api_key=self._key,
            base_url=endpoint.base_url,
            timeout=option(settings, "timeoutS", float, DEFAULT_TIMEOUT_S),
            max_retries=option(settings, "maxRetries", int, DEFAULT_MAX_RETRIES),
        )
        self._endpoint = endpoint_of(str(self._client.base_url))

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return f"Anthropic ({self._model})"

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self, request: InferenceRequest, on_delta: DeltaSink | None = None
    ) -> InferenceResult:
        arguments: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_output_tokens or self._max_tokens,
            "messages": to_anthropic_messages(request),
        }
        if request.system_prompt:
            arguments["system"] = request.system_prompt
        if request.tools:
            arguments["tools"] = to_anthropic_tools(list(request.tools))
        if self._temperature is not None:
            arguments["temperature"] = self._temperature
        try:
            if on_delta is None:
                response = await self._client.messages.create(**arguments)
                return from_anthropic_response(self._id, self._model, response)
            streamed = StreamedMessage(on_delta)
            stream = await self._client.messages.create(**arguments, stream=True)
            async with stream:
                async for event in stream:
                    streamed.add(event)
            return streamed.result(self._id, self._model)
        except Exception as exc:  # the SDK's errors, and a response we cannot read
            # ``from None``: the SDK exception holds the request, headers and all.
            raise ProviderError(
                self._id, describe_error(exc, secret=self._key, endpoint=self._endpoint)
            ) from None

    async def close(self) -> None:
        await self._client.close()


def create(
    settings: ProviderSettings, auth: AuthEntry | None, env: Mapping[str, str]
) -> AnthropicProvider:
    return AnthropicProvider(settings, auth, env)


PROVIDER_TYPE = ProviderType(
    type="anthropic",
    label="Anthropic",
    create=create,
    needs_auth=True,
    locate=locate,
    description="Claude models through the Messages API.",
)
