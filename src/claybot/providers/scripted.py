"""Deterministic providers for tests, demos and benchmarks.

Models:
- ``echo``: replies ``echo: <last user text>``.
- ``script``: plays ``options.responses`` in order. Each response is a string
  (text) or ``{"text": ..., "toolCalls": [{"name": ..., "arguments": {...}}]}``.
  When the script runs out the provider fails (so fall-through can be tested).
- ``rules``: answers by content, so several agents can share one provider in
  any interleaving. ``options.rules`` is a list of ``{"match": substring,
  "response": response, "times": n?}``; the first rule whose ``match`` occurs in
  the newest non-assistant message (a user message or a tool result) answers.
  No matching rule is a provider failure.
- ``fail``: always fails.

Streaming (a call with ``on_delta``): with ``options.streamChunkChars`` the text goes
out in pieces of that many characters, ``options.streamDelayS`` apart (so a test can
see a reply arrive before its turn ends); without it the provider does not stream, as
a vendor endpoint that cannot (the benchmarks' ``echo`` costs one event a reply, not
two). A response object with ``"cutOff": true`` says the model hit its token limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    DeltaSink,
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    ProviderType,
    TokenUsage,
    ToolCall,
)

MODELS = ("echo", "script", "rules", "fail")
REQUESTS_KEPT = 10  # what tests look at; more would keep old contexts alive


def _last_user_text(request: InferenceRequest) -> str:
    # By index, not reversed(): an agent's context decodes each message it hands out,
    # and a generator stopped early cost more than the lookup (the echo benchmark).
    messages = request.messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user":
            return message.text
    return ""


def _last_input_text(request: InferenceRequest) -> str:
    messages = request.messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "assistant":
            return message.text
    return ""


@dataclass
class _Rule:
    match: str
    response: InferenceResult
    times: int | None  # None: any number of times


def _parse_rules(raw: Any) -> list[_Rule]:
    if not isinstance(raw, list):
        raise ValueError("must be a list")
    rules = []
    for index, rule in enumerate(raw):
        if not isinstance(rule, dict) or not isinstance(rule.get("match"), str):
            raise ValueError(f"rule {index} needs a string 'match'")
        times = rule.get("times")
        rules.append(_Rule(rule["match"], _parse_response(index, rule.get("response", "")), times))
    return rules


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
        return InferenceResult(
            text=str(raw.get("text") or ""),
            tool_calls=tuple(calls),
            cut_off=bool(raw.get("cutOff", False)),
        )
    raise ValueError(f"response {index} must be a string or an object, got {type(raw).__name__}")


class ScriptedProvider:
    def __init__(self, settings: ProviderSettings) -> None:
        self._id = settings.id
        self._model = settings.model or "echo"
        if self._model not in MODELS:
            raise ProviderConfigError(self._id, f"unknown scripted model {self._model!r}")
        self._delay_s = float(settings.options.get("delayS", 0.0))
        self._chunk_chars = int(settings.options.get("streamChunkChars", 0))
        self._chunk_delay_s = float(settings.options.get("streamDelayS", 0.0))
        responses = settings.options.get("responses", [])
        if not isinstance(responses, list):
            raise ProviderConfigError(self._id, "options.responses must be a list")
        try:
            self._script = [_parse_response(i, raw) for i, raw in enumerate(responses)]
        except (KeyError, ValueError) as exc:
            raise ProviderConfigError(self._id, f"options.responses: {exc}") from exc
        try:
            self._rules = _parse_rules(settings.options.get("rules", []))
        except (KeyError, ValueError) as exc:
            raise ProviderConfigError(self._id, f"options.rules: {exc}") from exc
        self._position = 0
        # The recent requests, for tests to inspect. Bounded: each holds its agent's
        # whole context window, and a benchmark sends hundreds of thousands.
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

    async def complete(
        self, request: InferenceRequest, on_delta: DeltaSink | None = None
    ) -> InferenceResult:
        result = await self._answer(request)
        if on_delta is not None and result.text and self._chunk_chars:
            await self._stream(result.text, on_delta)
        return result

    async def _stream(self, text: str, on_delta: DeltaSink) -> None:
        size = self._chunk_chars
        for start in range(0, len(text), size):
            if start and self._chunk_delay_s:
                await asyncio.sleep(self._chunk_delay_s)
            on_delta(text[start : start + size])

    async def _answer(self, request: InferenceRequest) -> InferenceResult:
        self.requests.append(request)
        if len(self.requests) > REQUESTS_KEPT:
            del self.requests[0]
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        if self._model == "fail":
            raise ProviderError(self._id, "the scripted 'fail' model always fails")
        if self._model == "echo":
            text = f"echo: {_last_user_text(request)}"
            usage = TokenUsage(input=len(text) - len("echo: "), output=len(text))
            return InferenceResult(text=text, usage=usage, provider_id=self._id, model=self._model)
        if self._model == "rules":
            result = self._rule_response(_last_input_text(request))
        else:
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
            cut_off=result.cut_off,
        )

    def _rule_response(self, text: str) -> InferenceResult:
        for rule in self._rules:
            if rule.match in text and (rule.times is None or rule.times > 0):
                if rule.times is not None:
                    rule.times -= 1
                self._position += 1  # tool call ids must stay unique within a turn
                calls = tuple(
                    ToolCall(f"{call.id}_{self._position}", call.name, call.arguments)
                    for call in rule.response.tool_calls
                )
                return InferenceResult(text=rule.response.text, tool_calls=calls)
        raise ProviderError(self._id, f"no rule matches {text[:200]!r}")

    async def close(self) -> None:
        return None


def create(
    settings: ProviderSettings, auth: AuthEntry | None, env: Mapping[str, str]
) -> ScriptedProvider:
    return ScriptedProvider(settings)


PROVIDER_TYPE = ProviderType(
    type="scripted",
    label="Scripted",
    create=create,
    description="Deterministic replies for tests and demos (models: echo, script, fail).",
)
