"""OpenAI-compatible chat completions through the official ``openai`` SDK.

``options.baseUrl`` points it at OpenRouter, Ollama, vLLM or llama-server. The SDK
is imported when a provider is created, never when the engine boots.

Options (settings.json, camelCase): ``baseUrl``, ``timeoutS`` (60), ``maxRetries`` (1),
``temperature``, ``maxTokens``. The key is the auth entry's ``apiKey``, else
``OPENAI_API_KEY`` (see ``resolve_endpoint`` for where it may be sent).

The request body is built here as JSON and sent through the SDK's own ``post`` with
the options ``chat.completions.create`` uses: the SDK's retries, errors and streaming
(its SSE decoding, its error events) stay; its per-call transform of the body does
not, nor its response models. The transform walked every message of the context as a
TypedDict: 0.17 ms per message, 30 ms of the event loop per call at 200 messages; a
chunk's model took 86 us to build, once per token streamed. Each message's JSON is
kept by the agent's context (``providers/encoded.py``), so a call encodes only what
is new, and answers are read as the JSON the SDK parsed.
``tests/providers/test_request_bodies.py`` holds the body equal to the SDK's own.

It is longer than most modules because it is one vendor's whole wire format both
ways (messages and tools out; answers, streamed chunks, usage and errors in), kept
beside the provider that uses it, as ``anthropic_provider.py`` is for Anthropic's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, NotRequired
from urllib.parse import urlsplit

import orjson
from typing_extensions import TypedDict

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    AssistantMessage,
    ChatMessage,
    DeltaSink,
    Endpoint,
    InferenceRequest,
    InferenceResult,
    ProviderError,
    ProviderType,
    TokenUsage,
    ToolCall,
    ToolMessage,
    ToolSchema,
)
from claybot.providers.encoded import encoded_messages, files_to_encode
from claybot.providers.images import image_parts
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
    import openai
    from openai._types import RequestOptions
    from openai.types.chat import (
        ChatCompletionContentPartParam,
        ChatCompletionMessageParam,
        ChatCompletionToolParam,
    )

DEFAULT_MODEL = "gpt-5.4-mini"
COMPLETIONS_PATH = "/chat/completions"
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # what the API takes per image
# What ``chat.completions.create`` passes the SDK besides the body: the key as a bearer.
REQUEST_OPTIONS: RequestOptions = {"security": {"bearer_auth": True}}
VENDOR_HOST = "api.openai.com"
KEY_VARIABLE = "OPENAI_API_KEY"
URL_VARIABLE = "OPENAI_BASE_URL"


# -- our messages to the Chat Completions API ---------------------------------------------


class ChatCodec:
    """A message as Chat Completions JSON; fragments end in a comma, so a run of them
    is the inside of the ``messages`` array but for its last byte."""

    key = "openai.chat"

    def encode(self, message: ChatMessage) -> tuple[int, bytes]:
        return 0, orjson.dumps(_message(message)) + b","


CHAT_CODEC = ChatCodec()


def messages_json(request: InferenceRequest) -> orjson.Fragment:
    """The ``messages`` array as JSON: the system prompt, then the context's messages
    from their kept encodings."""
    run = encoded_messages(request.messages, CHAT_CODEC)
    parts = [b"["]
    if request.system_prompt:
        parts.append(orjson.dumps({"role": "system", "content": request.system_prompt}))
        if run.data:
            parts.append(b",")
    parts += (run.data[:-1], b"]")
    return orjson.Fragment(b"".join(parts))


def to_openai_messages(request: InferenceRequest) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages.extend(_message(message) for message in request.messages)
    return messages


def _message(message: ChatMessage) -> ChatCompletionMessageParam:
    if isinstance(message, ToolMessage):
        # The API has no error flag on tool results; say it in the content.
        content = f"Error: {message.text}" if message.is_error else message.text
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, AssistantMessage):
        if not message.tool_calls:
            return {"role": "assistant", "content": message.text}
        return {
            "role": "assistant",
            "content": message.text or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ],
        }
    if message.files:
        images = image_parts(message, MAX_IMAGE_BYTES)
        if images:
            parts: list[ChatCompletionContentPartParam] = [{"type": "text", "text": message.text}]
            parts += (
                {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
                for mime, data in images
            )
            return {"role": "user", "content": parts}
    return {"role": "user", "content": message.text}


def to_openai_tools(tools: list[ToolSchema]) -> list[ChatCompletionToolParam]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


# -- the response back to ours ---------------------------------------------------------


def _decode_arguments(raw: str | None) -> dict[str, Any]:
    """Tool arguments as an object; what the model wrote is kept when it is not one."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def from_openai_response(provider_id: str, model: str, response: Any) -> InferenceResult:
    """A completion, as the JSON the SDK parsed (its models cost 0.1 ms to build)."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if not choices:
        raise ProviderError(provider_id, "the response had no choices")
    message = choices[0].get("message") or {}
    calls = tuple(
        # Some OpenAI-compatible servers leave the id out; the tool loop needs one.
        ToolCall(
            call.get("id") or f"call_{position}",
            (call.get("function") or {}).get("name") or "",
            _decode_arguments((call.get("function") or {}).get("arguments")),
        )
        for position, call in enumerate(message.get("tool_calls") or [])
        if call.get("type", "function") == "function"
    )
    return InferenceResult(
        text=message.get("content") or message.get("refusal") or "",
        tool_calls=calls,
        usage=_usage(response.get("usage")),
        provider_id=provider_id,
        model=response.get("model") or model,
        cut_off=choices[0].get("finish_reason") == "length",
    )


def _usage(usage: dict[str, Any] | None) -> TokenUsage:
    if not usage:
        return TokenUsage()
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    # Our ``input`` excludes cached tokens, as Anthropic's does, so totals add up.
    return TokenUsage(
        input=max(0, (usage.get("prompt_tokens") or 0) - cached),
        output=usage.get("completion_tokens") or 0,
        cache_read=cached,
    )


class StreamedCompletion:
    """A streamed answer put back together from its chunks: text as it comes (to
    ``on_delta``), tool calls from their pieces (by index), usage from the last chunk.

    Chunks come as the JSON the SDK parsed, not as its models: a vendor sends one per
    token or so, and building a ``ChatCompletionChunk`` took 86 us of the event loop
    each (43 ms for a 500-token reply)."""

    def __init__(self, on_delta: DeltaSink) -> None:
        self._on_delta = on_delta
        self._text: list[str] = []
        self._calls: dict[int, _CallPieces] = {}
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._model = ""

    def add(self, chunk: object) -> None:
        if not isinstance(chunk, dict):
            return  # not a chunk: nothing to take from it
        self._model = chunk.get("model") or self._model
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in (chunk.get("choices") or ())[:1]:
            self._finish_reason = choice.get("finish_reason") or self._finish_reason
            delta = choice.get("delta") or {}
            piece = delta.get("content") or delta.get("refusal")
            if piece:
                self._text.append(piece)
                self._on_delta(piece)
            for call in delta.get("tool_calls") or ():
                pieces = self._calls.setdefault(call.get("index") or 0, _CallPieces())
                pieces.id = call.get("id") or pieces.id
                function = call.get("function")
                if function:
                    pieces.name += function.get("name") or ""
                    pieces.arguments += function.get("arguments") or ""

    def result(self, provider_id: str, model: str) -> InferenceResult:
        calls = tuple(
            ToolCall(
                pieces.id or f"call_{position}", pieces.name, _decode_arguments(pieces.arguments)
            )
            for position, (_, pieces) in enumerate(sorted(self._calls.items()))
            if pieces.name
        )
        return InferenceResult(
            text="".join(self._text),
            tool_calls=calls,
            usage=_usage(self._usage),
            provider_id=provider_id,
            model=self._model or model,
            cut_off=self._finish_reason == "length",
        )


@dataclass
class _CallPieces:
    id: str = ""
    name: str = ""
    arguments: str = ""


def describe_error(exc: Exception, *, secret: str, endpoint: str) -> str:
    """What went wrong, in words the user can act on, and never the key."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        text = f"HTTP {exc.status_code}: {vendor_message(exc.body) or exc.message}"
    elif isinstance(exc, openai.APITimeoutError):
        text = f"no answer from {endpoint} in time (options.timeoutS)"
    elif isinstance(exc, openai.APIConnectionError):
        text = f"cannot reach {endpoint}: {exc.message}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return redact(text[:MAX_ERROR_CHARS], secret)


MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


def max_tokens_field(base_url: str) -> MaxTokensField:
    """OpenAI deprecated ``max_tokens`` (its reasoning models refuse it); many compatible
    servers know only ``max_tokens``."""
    return "max_completion_tokens" if urlsplit(base_url).hostname == VENDOR_HOST else "max_tokens"


# -- the provider ------------------------------------------------------------------------


class StreamOptions(TypedDict):
    include_usage: bool


class CompletionBody(TypedDict):
    """The body of a chat completion as we send it: what ``chat.completions.create``
    takes as its arguments, but for ``messages``, which may be JSON already encoded."""

    model: str
    messages: list[ChatCompletionMessageParam] | orjson.Fragment
    tools: NotRequired[list[ChatCompletionToolParam]]
    max_completion_tokens: NotRequired[int]  # OpenAI's own API (see max_tokens_field)
    max_tokens: NotRequired[int]  # the compatible servers'
    temperature: NotRequired[float]
    stream: NotRequired[bool]
    stream_options: NotRequired[StreamOptions]


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
    return replace(endpoint, base_url=endpoint.base_url or f"https://{VENDOR_HOST}/v1")


class OpenAIProvider:
    def __init__(
        self,
        settings: ProviderSettings,
        auth: AuthEntry | None,
        env: Mapping[str, str],
    ) -> None:
        import openai

        # The JSON as parsed, not the SDK's models (see StreamedCompletion); made once.
        self._stream_type = openai.AsyncStream[object]
        self._id = settings.id
        self._model = settings.model or DEFAULT_MODEL
        endpoint = locate(settings, auth, env)
        self._key = endpoint.key
        self._temperature = option(settings, "temperature", float, None)
        self._max_tokens = option(settings, "maxTokens", int, None)
        self._client: openai.AsyncOpenAI = openai.AsyncOpenAI(
            api_key=self._key,
            base_url=endpoint.base_url,
            timeout=option(settings, "timeoutS", float, DEFAULT_TIMEOUT_S),
            max_retries=option(settings, "maxRetries", int, DEFAULT_MAX_RETRIES),
        )
        self._endpoint = endpoint_of(str(self._client.base_url))
        self._max_tokens_field = max_tokens_field(str(self._client.base_url))

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return f"OpenAI-compatible ({self._model})"

    @property
    def model(self) -> str:
        return self._model

    def request_body(
        self,
        request: InferenceRequest,
        *,
        stream: bool,
        messages: orjson.Fragment | None = None,
    ) -> CompletionBody:
        """The JSON body of the call, as ``chat.completions.create`` takes its arguments
        (``messages``: the messages already as JSON, else built as dicts)."""
        body: CompletionBody = {
            "model": self._model,
            "messages": to_openai_messages(request) if messages is None else messages,
        }
        if request.tools:
            body["tools"] = to_openai_tools(list(request.tools))
        max_tokens = request.max_output_tokens or self._max_tokens
        if max_tokens:
            if self._max_tokens_field == "max_tokens":
                body["max_tokens"] = max_tokens
            else:
                body["max_completion_tokens"] = max_tokens
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}  # the last chunk: the counts
        return body

    async def complete(
        self, request: InferenceRequest, on_delta: DeltaSink | None = None
    ) -> InferenceResult:
        # Bytes as the content: the SDK sends them as they are (no transform, no
        # second encoding).
        if files_to_encode(request.messages, CHAT_CODEC):
            # Images to read and encode (once: the context keeps them): not on the loop.
            messages = await asyncio.to_thread(messages_json, request)
        else:
            messages = messages_json(request)
        body = self.request_body(request, stream=on_delta is not None, messages=messages)
        payload = orjson.dumps(body)
        client = self._client
        try:
            if on_delta is None:
                response = await client.post(
                    COMPLETIONS_PATH,
                    cast_to=object,
                    content=payload,
                    options=REQUEST_OPTIONS,
                )
                return from_openai_response(self._id, self._model, response)
            streamed = StreamedCompletion(on_delta)
            stream = await client.post(
                COMPLETIONS_PATH,
                cast_to=object,
                content=payload,
                options=REQUEST_OPTIONS,
                stream=True,
                stream_cls=self._stream_type,
            )
            async with stream:
                async for chunk in stream:
                    streamed.add(chunk)
            return streamed.result(self._id, self._model)
        except ProviderError:
            raise
        except Exception as exc:  # the SDK's errors, and a response we cannot read
            # ``from None``: the SDK exception holds the request, headers and all.
            raise ProviderError(
                self._id, describe_error(exc, secret=self._key, endpoint=self._endpoint)
            ) from None

    async def close(self) -> None:
        await self._client.close()


def create(
    settings: ProviderSettings, auth: AuthEntry | None, env: Mapping[str, str]
) -> OpenAIProvider:
    return OpenAIProvider(settings, auth, env)


PROVIDER_TYPE = ProviderType(
    type="openai",
    label="OpenAI-compatible",
    create=create,
    needs_auth=True,
    locate=locate,
    description="OpenAI chat completions; options.baseUrl: OpenRouter, Ollama, vLLM, llama-server.",
)
