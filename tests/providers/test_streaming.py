"""Streaming calls: each provider hands its text out as it comes, and the answer it
returns is the one a plain call returns (tool calls, usage, a cut-off reply)."""

from __future__ import annotations

import logging

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.base import (
    InferenceRequest,
    InferenceResult,
    TokenUsage,
    ToolCall,
    UserMessage,
)
from claybot.providers.openai_provider import OpenAIProvider
from claybot.providers.router import InferenceFailed, InferenceRouter
from claybot.providers.scripted import ScriptedProvider
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI

PING = InferenceRequest([UserMessage("ping")])
LONG_TEXT = "The quick brown fox jumps over the lazy dog, and then it rests."


class Recorder:
    """A CallObserver that keeps what it was told."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.fallbacks: list[tuple[str, str, str]] = []

    def delta(self, text: str) -> None:
        self.deltas.append(text)

    def fallback(self, failed: str, next_provider: str, reason: str) -> None:
        self.fallbacks.append((failed, next_provider, reason))


async def test_openai_streams_text_piece_by_piece(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    fake_openai.reply_text(LONG_TEXT)
    deltas: list[str] = []
    result = await openai_provider.complete(PING, deltas.append)
    assert fake_openai.last_body["stream"] is True
    assert len(deltas) == len(LONG_TEXT.split()) and "".join(deltas) == LONG_TEXT
    assert result.text == LONG_TEXT and not result.cut_off
    # The usage comes in the last chunk, as include_usage asks.
    assert result.usage == TokenUsage(input=10, output=5, cache_read=2)


async def test_openai_streamed_tool_calls_are_put_back_together(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    fake_openai.reply_tool_calls(
        ("call_1", "read_file", {"path": "notes/today.md"}),
        ("call_2", "write_file", {"path": "a.txt", "content": "x" * 40}),
        text="Let me look.",
    )
    deltas: list[str] = []
    result = await openai_provider.complete(PING, deltas.append)
    assert "".join(deltas) == "Let me look."
    assert result.tool_calls == (
        ToolCall("call_1", "read_file", {"path": "notes/today.md"}),
        ToolCall("call_2", "write_file", {"path": "a.txt", "content": "x" * 40}),
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_says_when_a_reply_was_cut_off(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider, stream: bool
) -> None:
    fake_openai.reply_cut_off("It all began in")
    result = await openai_provider.complete(PING, [].append if stream else None)
    assert result.cut_off and result.text == "It all began in"


async def test_anthropic_streams_text_piece_by_piece(
    fake_anthropic: FakeAnthropic, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.reply_text(LONG_TEXT)
    deltas: list[str] = []
    result = await anthropic_provider.complete(PING, deltas.append)
    assert fake_anthropic.last_body["stream"] is True
    assert len(deltas) == len(LONG_TEXT.split()) and "".join(deltas) == LONG_TEXT
    assert result.text == LONG_TEXT and not result.cut_off
    assert result.usage == TokenUsage(input=20, output=7, cache_read=3, cache_write=1)


async def test_anthropic_streamed_tool_use_is_put_back_together(
    fake_anthropic: FakeAnthropic, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.reply_tool_use("toolu_1", "read_file", {"path": "notes/today.md"}, "Looking.")
    deltas: list[str] = []
    result = await anthropic_provider.complete(PING, deltas.append)
    assert "".join(deltas) == "Looking." and result.text == "Looking."
    assert result.tool_calls == (ToolCall("toolu_1", "read_file", {"path": "notes/today.md"}),)


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_says_when_a_reply_was_cut_off(
    fake_anthropic: FakeAnthropic, anthropic_provider: AnthropicProvider, stream: bool
) -> None:
    fake_anthropic.reply_cut_off("It all began in")
    result = await anthropic_provider.complete(PING, [].append if stream else None)
    assert result.cut_off and result.text == "It all began in"


async def test_a_streaming_vendor_error_falls_through_and_the_observer_hears_why(
    fake_openai: FakeOpenAI,
    openai_provider: OpenAIProvider,
    fake_anthropic: FakeAnthropic,
    anthropic_provider: AnthropicProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_openai.reply_error(503, "overloaded", "server_error")
    fake_anthropic.reply_text("from claude")
    observer = Recorder()
    with caplog.at_level(logging.WARNING, logger="claybot.providers.router"):
        result = await InferenceRouter([openai_provider, anthropic_provider]).complete(
            PING, observer
        )
    assert result.provider_id == "anthropic" and observer.deltas == ["from", " claude"]
    [(failed, following, reason)] = observer.fallbacks
    assert (failed, following) == ("openai", "anthropic") and "HTTP 503" in reason
    # The log line names the provider and the reason, not only "a provider failed".
    [line] = [r.getMessage() for r in caplog.records]
    assert "openai" in line and "HTTP 503: overloaded" in line and "anthropic" in line


async def test_a_provider_that_could_not_be_built_is_named_with_its_reason() -> None:
    router = InferenceRouter([])
    await router.replace([], {"openai": "no API key: run `claybot auth set openai apiKey <key>`"})
    with pytest.raises(InferenceFailed) as caught:
        await router.complete(PING)
    assert "no provider is configured" not in str(caught.value)
    assert "openai: no API key" in str(caught.value)


async def test_the_scripted_provider_streams_in_the_pieces_it_is_told() -> None:
    provider = ScriptedProvider(
        ProviderSettings(id="s", model="echo", options={"streamChunkChars": 4})
    )
    deltas: list[str] = []
    result = await provider.complete(PING, deltas.append)
    assert deltas == ["echo", ": pi", "ng"] and result.text == "echo: ping"


class RequestOnly:
    """A provider type written before streaming: its complete takes the request only."""

    id = label = model = "old"

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        return InferenceResult("still here", provider_id="old")

    async def close(self) -> None:
        return None


async def test_a_provider_that_cannot_stream_still_answers_a_streaming_call() -> None:
    observer = Recorder()
    result = await InferenceRouter([RequestOnly()]).complete(PING, observer)
    assert result.text == "still here" and observer.deltas == []
