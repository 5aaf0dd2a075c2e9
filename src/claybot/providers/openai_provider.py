"""OpenAI-compatible chat completions through the official ``openai`` SDK.

``options.baseUrl`` points it at OpenRouter, Ollama, vLLM or llama-server. The SDK
is imported when a provider is created, not when the engine boots.
"""

from __future__ import annotations

import json
import os
from typing import Any

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    ChatMessage,
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    TokenUsage,
    ToolCall,
)
from claybot.providers.registry import ProviderType

DEFAULT_MODEL = "gpt-4o-mini"
# Local servers ignore the key but the SDK insists on one.
PLACEHOLDER_KEY = "not-needed"


def to_openai_messages(request: InferenceRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    for message in request.messages:
        messages.append(_message(message))
    return messages


def _message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "assistant":
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in message.tool_calls
            ]
        return entry
    return {"role": "user", "content": message.text}


def _arguments(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


class OpenAIProvider:
    def __init__(self, settings: ProviderSettings, auth: AuthEntry | None) -> None:
        import openai

        self._id = settings.id
        self._model = settings.model or DEFAULT_MODEL
        options = settings.options
        base_url = options.get("baseUrl")
        key = (auth.secret("apiKey") if auth else None) or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not base_url:
                raise ProviderConfigError(
                    self._id,
                    f"no API key: run `claybot auth set {self._id} apiKey <key>` "
                    "(or set options.baseUrl for a local server that needs none)",
                )
            key = PLACEHOLDER_KEY
        self._temperature = options.get("temperature")
        self._max_tokens = options.get("maxTokens")
        self._client = openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            timeout=float(options.get("timeoutS", 60)),
            max_retries=int(options.get("maxRetries", 1)),
        )
        self._errors: tuple[type[Exception], ...] = (openai.OpenAIError,)

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return f"OpenAI-compatible ({self._model})"

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        arguments: dict[str, Any] = {"model": self._model, "messages": to_openai_messages(request)}
        if request.tools:
            arguments["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
        max_tokens = request.max_output_tokens or self._max_tokens
        if max_tokens:
            arguments["max_tokens"] = int(max_tokens)
        if self._temperature is not None:
            arguments["temperature"] = float(self._temperature)
        try:
            response = await self._client.chat.completions.create(**arguments)
        except self._errors as exc:
            raise ProviderError(self._id, _describe(exc)) from None
        if not response.choices:
            raise ProviderError(self._id, "the response had no choices")
        message = response.choices[0].message
        calls = tuple(
            ToolCall(call.id, call.function.name, _arguments(call.function.arguments))
            for call in (message.tool_calls or [])
            if getattr(call, "function", None) is not None
        )
        usage = TokenUsage()
        if response.usage is not None:
            details = getattr(response.usage, "prompt_tokens_details", None)
            cached = int(getattr(details, "cached_tokens", 0) or 0)
            usage = TokenUsage(
                input=int(response.usage.prompt_tokens or 0) - cached,
                output=int(response.usage.completion_tokens or 0),
                cache_read=cached,
            )
        return InferenceResult(
            text=message.content or "",
            tool_calls=calls,
            usage=usage,
            provider_id=self._id,
            model=response.model or self._model,
        )

    async def close(self) -> None:
        await self._client.close()


def _describe(exc: Exception) -> str:
    """The error without anything that could carry the key (headers, request objects)."""
    status = getattr(exc, "status_code", None)
    message = getattr(exc, "message", None) or type(exc).__name__
    return f"HTTP {status}: {message}" if status else str(message)


def create(settings: ProviderSettings, auth: AuthEntry | None) -> OpenAIProvider:
    return OpenAIProvider(settings, auth)


PROVIDER_TYPE = ProviderType(
    type="openai",
    label="OpenAI-compatible",
    create=create,
    needs_auth=True,
    description="OpenAI chat completions; options.baseUrl: OpenRouter, Ollama, vLLM, llama-server.",
)
