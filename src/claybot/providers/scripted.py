"""Deterministic providers for tests, demos and benchmarks.

Models:
- ``echo``: replies ``echo: <last user text>``.
- ``script``: plays ``options.responses`` in order. Each response is a string
  (text) or ``{"text": ..., "toolCalls": [{"name": ..., "arguments": {...}}]}``.
  When the script runs out the provider fails (so fall-through can be tested).
- ``fail``: always fails.
"""

from __future__ import annotations

import asyncio
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
from claybot.providers.registry import ProviderType

MODELS = ("echo", "script", "fail")


def _last_user_text(request: InferenceRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


def _parse_response(index: int, raw: Any) -> InferenceResult:
    if isinstance(raw, str):
        return InferenceResult(text=raw)
    if isinstance(raw, dict):
        calls = []
        for position, call in enumerate(raw.get("toolCalls") or []):
            calls.append(
                ToolCall(
                    id=str(call.get("id") or f"call_{index}_{position}"),
                    name=str(call["name"]),
                    arguments=dict(call.get("arguments") or {}),
                )
            )
        return InferenceResult(text=str(raw.get("text") or ""), tool_calls=tuple(calls))
    raise ValueError(f"response {index} must be a string or an object, got {type(raw).__name__}")


class ScriptedProvider:
    def __init__(self, settings: ProviderSettings) -> None:
        self._id = settings.id
        self._model = settings.model or "echo"
        if self._model not in MODELS:
            raise ProviderConfigError(self._id, f"unknown scripted model {self._model!r}")
        self._delay_s = float(settings.options.get("delayS", 0.0))
        responses = settings.options.get("responses", [])
        if not isinstance(responses, list):
            raise ProviderConfigError(self._id, "options.responses must be a list")
        try:
            self._script = [_parse_response(i, raw) for i, raw in enumerate(responses)]
        except (KeyError, ValueError) as exc:
            raise ProviderConfigError(self._id, f"options.responses: {exc}") from exc
        self._position = 0
        self.requests: list[InferenceRequest] = []

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return f"Scripted ({self._model})"

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        self.requests.append(request)
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        if self._model == "fail":
            raise ProviderError(self._id, "the scripted 'fail' model always fails")
        if self._model == "echo":
            text = f"echo: {_last_user_text(request)}"
            usage = TokenUsage(input=len(text) - len("echo: "), output=len(text))
            return InferenceResult(text=text, usage=usage, provider_id=self._id, model=self._model)
        if self._position >= len(self._script):
            raise ProviderError(self._id, "the script has no responses left")
        result = self._script[self._position]
        self._position += 1
        return InferenceResult(
            text=result.text,
            tool_calls=result.tool_calls,
            usage=TokenUsage(input=1, output=1),
            provider_id=self._id,
            model=self._model,
        )

    async def close(self) -> None:
        return None


def create(settings: ProviderSettings, auth: AuthEntry | None) -> ScriptedProvider:
    return ScriptedProvider(settings)


PROVIDER_TYPE = ProviderType(
    type="scripted",
    label="Scripted",
    create=create,
    description="Deterministic replies for tests and demos (models: echo, script, fail).",
)
