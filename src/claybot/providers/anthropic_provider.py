"""Anthropic's Messages API through the official ``anthropic`` SDK.

The SDK is imported when a provider is created, never when the engine boots.

Options (settings.json, camelCase): ``baseUrl``, ``timeoutS`` (60), ``maxRetries`` (1),
``temperature``, ``maxTokens`` (1024; the API requires a limit). The key is the auth
entry's ``apiKey``, else ``ANTHROPIC_API_KEY``.

As with the OpenAI provider, the body is built here as JSON and sent through the
SDK's own ``post``, which keeps its retries, errors and streaming; each message's JSON
is kept by the agent's context (``providers/encoded.py``) and only regrouped into turns
on each call, and answers are read as the JSON the SDK parsed.

It is longer than most modules because it is one vendor's whole wire format both
ways (messages and tools out; answers, streamed events, usage and errors in), kept
beside the provider that uses it, as ``openai_provider.py`` is for OpenAI's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NotRequired, TypeAlias

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
    UserMessage,
)
from claybot.providers.encoded import EncodedRun, encoded_messages, files_to_encode
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
    import anthropic
    from anthropic.types import (
        AssistantMessageParam,
        ImageBlockParam,
        MessageParam,
        TextBlockParam,
        ToolParam,
        ToolResultBlockParam,
        ToolUseBlockParam,
    )

    # What a user turn holds here: a user's images and text, and tool results.
    UserBlock: TypeAlias = TextBlockParam | ImageBlockParam | ToolResultBlockParam

DEFAULT_MODEL = "claude-sonnet-4-6"
MESSAGES_PATH = "/v1/messages"
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # what the API takes per image
DEFAULT_MAX_TOKENS = 1024
VENDOR_HOST = "api.anthropic.com"
KEY_VARIABLE = "ANTHROPIC_API_KEY"
URL_VARIABLE = "ANTHROPIC_BASE_URL"
# The API refuses empty text blocks.
EMPTY_TEXT = "(empty)"


# -- our messages to the Messages API --------------------------------------------------------


def to_anthropic_messages(request: InferenceRequest) -> list[MessageParam]:
    """Our messages as Anthropic turns.

    Tool results are ``tool_result`` blocks in a user turn; consecutive ones share
    that turn, because the API wants every result of one assistant turn together
    right after it.
    """
    turns: list[MessageParam] = []
    user: list[UserBlock] | None = None  # the last turn's blocks, while it is a user's
    for message in request.messages:
        if isinstance(message, ToolMessage):
            block = _tool_result(message)
            if user is not None and _only_tool_results(user):
                user.append(block)
            else:
                user = [block]
                turns.append({"role": "user", "content": user})
        elif isinstance(message, AssistantMessage):
            turn = _assistant_turn(message)
            if turn is not None:
                turns.append(turn)
                user = None
        elif user is not None:
            user.extend(_user_blocks(message))  # text may follow tool results in one turn
        else:
            user = _user_blocks(message)
            turns.append({"role": "user", "content": user})
    return turns


def _tool_result(message: ToolMessage) -> ToolResultBlockParam:
    block: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": message.text,
    }
    if message.is_error:
        block["is_error"] = True
    return block


def _assistant_turn(message: AssistantMessage) -> AssistantMessageParam | None:
    """None for a message that said nothing: an empty turn would be refused."""
    content: list[TextBlockParam | ToolUseBlockParam] = []
    if message.text.strip():
        content.append({"type": "text", "text": message.text})
    content.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    )
    return {"role": "assistant", "content": content} if content else None


def _user_blocks(message: UserMessage) -> list[UserBlock]:
    """A user's message: its images first (as the API advises), then its text."""
    blocks: list[UserBlock] = [
        {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
        for mime, data in (image_parts(message, MAX_IMAGE_BYTES) if message.files else ())
    ]
    blocks.append({"type": "text", "text": message.text if message.text.strip() else EMPTY_TEXT})
    return blocks


# What a message is in a turn: a user's text block, a tool result block, a whole
# assistant turn, or nothing (an assistant that said nothing).
USER_TEXT, TOOL_RESULT, ASSISTANT, NOTHING = b"u"[0], b"t"[0], b"a"[0], b"-"[0]


class MessagesCodec:
    """A message as Messages API JSON: a user's text or a tool result as a block (turns
    are grouped on each call, as ``to_anthropic_messages`` groups them), an assistant
    message as its whole turn."""

    key = "anthropic.messages"

    def encode(self, message: ChatMessage) -> tuple[int, bytes]:
        if isinstance(message, ToolMessage):
            return TOOL_RESULT, orjson.dumps(_tool_result(message))
        if isinstance(message, AssistantMessage):
            turn = _assistant_turn(message)
            return (ASSISTANT, orjson.dumps(turn)) if turn is not None else (NOTHING, b"")
        # The blocks joined as the inside of a content array: a turn joins fragments so.
        return USER_TEXT, b",".join(orjson.dumps(block) for block in _user_blocks(message))


MESSAGES_CODEC = MessagesCodec()


def turns_json(run: EncodedRun) -> orjson.Fragment:
    """The ``messages`` array from encoded messages: consecutive tool results share a
    user turn, and a user's text joins the user turn before it."""
    parts = [b"["]
    blocks: list[bytes] = []  # the open user turn's
    only_results = False

    def close_user_turn() -> None:
        if blocks:
            if len(parts) > 1:
                parts.append(b",")
            parts.extend((b'{"role":"user","content":[', b",".join(blocks), b"]}"))
            blocks.clear()

    for kind, fragment in run.fragments():
        if kind == ASSISTANT:
            close_user_turn()
            if len(parts) > 1:
                parts.append(b",")
            parts.append(fragment)
        elif kind == TOOL_RESULT:
            if blocks and not only_results:
                close_user_turn()  # results of a turn go together, not after its text
            blocks.append(fragment)
            only_results = True
        elif kind == USER_TEXT:
            only_results = False
            blocks.append(fragment)
    close_user_turn()
    parts.append(b"]")
    return orjson.Fragment(b"".join(parts))


def _only_tool_results(blocks: list[UserBlock]) -> bool:
    return all(block["type"] == "tool_result" for block in blocks)


def to_anthropic_tools(tools: list[ToolSchema]) -> list[ToolParam]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


# -- the response back to ours ------------------------------------------------------------


def from_anthropic_response(provider_id: str, model: str, response: Any) -> InferenceResult:
    """A message, as the JSON the SDK parsed (not its models: see StreamedMessage)."""
    if not isinstance(response, dict):
        raise ProviderError(provider_id, "the response was not a message")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.get("content") or ():
        # Thinking and server-tool blocks are the vendor's business; we keep text and calls.
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            arguments = block.get("input")
            arguments = arguments if isinstance(arguments, dict) else {"_raw": arguments}
            calls.append(ToolCall(block.get("id") or "", block.get("name") or "", arguments))
    return InferenceResult(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=_usage(response.get("usage") or {}),
        provider_id=provider_id,
        model=response.get("model") or model,
        cut_off=response.get("stop_reason") == "max_tokens",
    )


def _usage(usage: dict[str, Any]) -> TokenUsage:
    return TokenUsage(
        input=usage.get("input_tokens") or 0,
        output=usage.get("output_tokens") or 0,
        cache_read=usage.get("cache_read_input_tokens") or 0,
        cache_write=usage.get("cache_creation_input_tokens") or 0,
    )


class StreamedMessage:
    """A streamed answer put back together from its events: text as it comes (to
    ``on_delta``), each tool call from its block's JSON pieces, usage from the start
    (input) and the end (output) of the message.

    Events come as the JSON the SDK parsed: building its event models cost more of the
    event loop than everything else a call does, once per event (about one a token)."""

    def __init__(self, on_delta: DeltaSink) -> None:
        self._on_delta = on_delta
        self._text: list[str] = []
        self._calls: dict[int, tuple[str, str, list[str]]] = {}  # index: id, name, JSON
        self._usage = TokenUsage()
        self._stop_reason: str | None = None
        self._model = ""

    def add(self, event: object) -> None:
        if not isinstance(event, dict):
            return  # not an event: nothing to take from it
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                self._piece(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta" and event.get("index") in self._calls:
                self._calls[event["index"]][2].append(delta.get("partial_json") or "")
        elif kind == "message_start":
            message = event.get("message") or {}
            self._model = message.get("model") or ""
            self._usage = _usage(message.get("usage") or {})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._calls[event.get("index") or 0] = (
                    block.get("id") or "",
                    block.get("name") or "",
                    [],
                )
            elif block.get("type") == "text" and block.get("text"):
                self._piece(block["text"])
        elif kind == "message_delta":
            self._stop_reason = (event.get("delta") or {}).get("stop_reason") or self._stop_reason
            output = (event.get("usage") or {}).get("output_tokens") or 0
            self._usage = replace(self._usage, output=output)

    def _piece(self, text: str) -> None:
        if text:
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


class MessagesBody(TypedDict):
    """The body of a Messages API call as we send it: what ``messages.create`` takes as
    its arguments, but for ``messages``, which may be JSON already encoded."""

    model: str
    max_tokens: int
    messages: list[MessageParam] | orjson.Fragment
    system: NotRequired[str]
    tools: NotRequired[list[ToolParam]]
    temperature: NotRequired[float]
    stream: NotRequired[bool]


class AnthropicProvider:
    def __init__(
        self,
        settings: ProviderSettings,
        auth: AuthEntry | None,
        env: Mapping[str, str],
    ) -> None:
        import anthropic

        # The JSON as parsed, not the SDK's models (see StreamedMessage); made once.
        self._stream_type = anthropic.AsyncStream[object]
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

    def request_body(
        self,
        request: InferenceRequest,
        *,
        stream: bool,
        messages: orjson.Fragment | None = None,
    ) -> MessagesBody:
        """The JSON body of the call, as ``messages.create`` takes its arguments
        (``messages``: the turns already as JSON, else built as dicts)."""
        body: MessagesBody = {
            "model": self._model,
            "max_tokens": request.max_output_tokens or self._max_tokens,
            "messages": to_anthropic_messages(request) if messages is None else messages,
        }
        if request.system_prompt:
            body["system"] = request.system_prompt
        if request.tools:
            body["tools"] = to_anthropic_tools(list(request.tools))
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if stream:
            body["stream"] = True
        return body

    async def complete(
        self, request: InferenceRequest, on_delta: DeltaSink | None = None
    ) -> InferenceResult:
        if files_to_encode(request.messages, MESSAGES_CODEC):
            # Images to read and encode (once: the context keeps them): not on the loop.
            run = await asyncio.to_thread(encoded_messages, request.messages, MESSAGES_CODEC)
        else:
            run = encoded_messages(request.messages, MESSAGES_CODEC)
        turns = turns_json(run)
        payload = orjson.dumps(
            self.request_body(request, stream=on_delta is not None, messages=turns)
        )
        client = self._client
        try:
            if on_delta is None:
                response = await client.post(MESSAGES_PATH, cast_to=object, content=payload)
                return from_anthropic_response(self._id, self._model, response)
            streamed = StreamedMessage(on_delta)
            stream = await client.post(
                MESSAGES_PATH,
                cast_to=object,
                content=payload,
                stream=True,
                stream_cls=self._stream_type,
            )
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
