"""Anthropic's Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

import os
from typing import Any

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    TokenUsage,
    ToolCall,
)
from claybot.providers.openai_provider import _describe
from claybot.providers.registry import ProviderType

DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_MAX_TOKENS = 1024


def to_anthropic_messages(request: InferenceRequest) -> list[dict[str, Any]]:
    """Our messages as Anthropic turns: consecutive tool results share one user turn."""
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.text,
                "is_error": message.is_error,
            }
            if turns and turns[-1]["role"] == "user" and _is_tool_results(turns[-1]):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif message.role == "assistant":
            content: list[dict[str, Any]] = []
            if message.text:
                content.append({"type": "text", "text": message.text})
            for call in message.tool_calls:
                content.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            turns.append(
                {"role": "assistant", "content": content or [{"type": "text", "text": ""}]}
            )
        else:
            turns.append({"role": "user", "content": [{"type": "text", "text": message.text}]})
    return turns


def _is_tool_results(turn: dict[str, Any]) -> bool:
    content = turn["content"]
    return isinstance(content, list) and all(
        block.get("type") == "tool_result" for block in content
    )


class AnthropicProvider:
    def __init__(self, settings: ProviderSettings, auth: AuthEntry | None) -> None:
        import anthropic

        self._id = settings.id
        self._model = settings.model or DEFAULT_MODEL
        options = settings.options
        key = (auth.secret("apiKey") if auth else None) or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ProviderConfigError(
                self._id, f"no API key: run `claybot auth set {self._id} apiKey <key>`"
            )
        self._max_tokens = int(options.get("maxTokens", DEFAULT_MAX_TOKENS))
        self._temperature = options.get("temperature")
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=options.get("baseUrl"),
            timeout=float(options.get("timeoutS", 60)),
            max_retries=int(options.get("maxRetries", 1)),
        )
        self._errors: tuple[type[Exception], ...] = (anthropic.AnthropicError,)

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return f"Anthropic ({self._model})"

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        arguments: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_output_tokens or self._max_tokens,
            "messages": to_anthropic_messages(request),
        }
        if request.system_prompt:
            arguments["system"] = request.system_prompt
        if request.tools:
            arguments["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if self._temperature is not None:
            arguments["temperature"] = float(self._temperature)
        try:
            response = await self._client.messages.create(**arguments)
        except self._errors as exc:
            raise ProviderError(self._id, _describe(exc)) from None
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in response.content:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(block.id, block.name, dict(block.input or {})))
        usage = response.usage
        return InferenceResult(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=TokenUsage(
                input=int(usage.input_tokens or 0),
                output=int(usage.output_tokens or 0),
                cache_read=int(getattr(usage, "cache_read_input_tokens", 0) or 0),
                cache_write=int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
            ),
            provider_id=self._id,
            model=response.model or self._model,
        )

    async def close(self) -> None:
        await self._client.close()


def create(settings: ProviderSettings, auth: AuthEntry | None) -> AnthropicProvider:
    return AnthropicProvider(settings, auth)


PROVIDER_TYPE = ProviderType(
    type="anthropic",
    label="Anthropic",
    create=create,
    needs_auth=True,
    description="Claude models through the Messages API.",
)
