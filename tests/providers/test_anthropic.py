"""The anthropic provider against a fake server speaking the Messages API."""

from __future__ import annotations

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.base import (
    AssistantMessage,
    InferenceRequest,
    ProviderConfigError,
    ProviderError,
    TokenUsage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from claybot.providers.options import PLACEHOLDER_KEY
from tests.providers.conftest import NO_ENV, SECRET
from tests.providers.fake_anthropic import FakeAnthropic

WEATHER = ToolSchema(
    "weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}}
)
HI = InferenceRequest([UserMessage("hi")])


def presented_key(headers: dict[str, str]) -> str:
    # Depending on the SDK version the key travels as x-api-key or as a bearer token.
    return headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")


async def test_text_round_trip_and_usage(
    fake_anthropic: FakeAnthropic, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.reply_text("Bonjour")
    result = await anthropic_provider.complete(
        InferenceRequest([UserMessage("salut")], system_prompt="Be brief")
    )
    assert (result.text, result.provider_id, result.model) == (
        "Bonjour",
        "anthropic",
        "claude-fake",
    )
    assert result.usage == TokenUsage(input=20, output=7, cache_read=3, cache_write=1)
    sent = fake_anthropic.requests[0]
    assert presented_key(sent.headers) == SECRET
    assert sent.body == {
        "model": "claude-fake",
        "max_tokens": 1024,
        "system": "Be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "salut"}]}],
    }


async def test_tool_use_both_ways(
    fake_anthropic: FakeAnthropic, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.reply_tool_use("toolu_9", "weather", {"city": "Oslo"}, text="Checking.")
    history = [
        UserMessage("weather in Paris and Rome?"),
        AssistantMessage(
            "",
            tool_calls=(
                ToolCall("toolu_1", "weather", {"city": "Paris"}),
                ToolCall("toolu_2", "weather", {"city": "Rome"}),
            ),
        ),
        ToolMessage(tool_call_id="toolu_1", tool_name="weather", text="sunny"),
        ToolMessage(tool_call_id="toolu_2", tool_name="weather", text="no data", is_error=True),
        UserMessage("and Oslo?"),
    ]
    result = await anthropic_provider.complete(
        InferenceRequest(history, tools=[WEATHER], max_output_tokens=300)
    )

    assert result.text == "Checking."
    assert result.tool_calls == (ToolCall("toolu_9", "weather", {"city": "Oslo"}),)
    body = fake_anthropic.last_body
    assert body["max_tokens"] == 300
    assert body["tools"] == [
        {"name": "weather", "description": "Weather for a city", "input_schema": WEATHER.parameters}
    ]
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Rome"}},
            ],
        },
        # Both results in the one user turn right after the calls, then the user's text.
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no data",
                    "is_error": True,
                },
                {"type": "text", "text": "and Oslo?"},
            ],
        },
    ]


async def test_a_vendor_error_is_a_provider_error_without_the_key(
    fake_anthropic: FakeAnthropic, anthropic_provider: AnthropicProvider
) -> None:
    fake_anthropic.reply_error(401, f"invalid x-api-key {SECRET}", "authentication_error")
    fake_anthropic.reply_error(529, "Overloaded", "overloaded_error")
    with pytest.raises(ProviderError) as caught:
        await anthropic_provider.complete(HI)
    assert str(caught.value).startswith("anthropic: HTTP 401: invalid x-api-key")
    assert SECRET not in str(caught.value)
    with pytest.raises(ProviderError, match="HTTP 529: Overloaded"):
        await anthropic_provider.complete(HI)


def test_without_a_key_it_says_how_to_set_one() -> None:
    with pytest.raises(
        ProviderConfigError, match=r"claybot auth set anthropic apiKey .*ANTHROPIC_API_KEY"
    ):
        AnthropicProvider(ProviderSettings(id="anthropic"), None, env=NO_ENV)


async def test_an_environment_key_only_goes_to_its_own_endpoint(
    fake_anthropic: FakeAnthropic,
) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_BASE_URL": fake_anthropic.api_base}
    for options, expected in [
        ({}, "sk-ant-env"),
        ({"baseUrl": fake_anthropic.api_base}, PLACEHOLDER_KEY),  # a gateway of its own
    ]:
        provider = AnthropicProvider(ProviderSettings(id="anthropic", options=options), None, env)
        fake_anthropic.reply_text("ok")
        await provider.complete(HI)
        await provider.close()
        assert presented_key(fake_anthropic.requests[-1].headers) == expected
