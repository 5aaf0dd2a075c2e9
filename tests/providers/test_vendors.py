"""The openai and anthropic providers against a fake vendor speaking their real APIs."""

from __future__ import annotations

import pytest

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.base import (
    ChatMessage,
    InferenceRequest,
    ProviderConfigError,
    ProviderError,
    ToolCall,
    ToolSchema,
)
from claybot.providers.openai_provider import OpenAIProvider
from tests.providers.fake_vendor import FakeVendor, anthropic_message, openai_text

SECRET = "sk-test-secret-0123456789"
WEATHER = ToolSchema(
    "weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}}
)
TOOL_EXCHANGE = [
    ChatMessage("user", "weather in Paris?"),
    ChatMessage("assistant", "", tool_calls=(ToolCall("call_1", "weather", {"city": "Paris"}),)),
    ChatMessage("tool", "sunny", tool_call_id="call_1", tool_name="weather"),
]


def openai(vendor: FakeVendor, **options: object) -> OpenAIProvider:
    settings = ProviderSettings(
        id="openai",
        model="gpt-fake",
        options={"baseUrl": f"{vendor.base_url}/v1", "maxRetries": 0, **options},
    )
    return OpenAIProvider(settings, AuthEntry.model_validate({"type": "apiKey", "apiKey": SECRET}))


def anthropic(vendor: FakeVendor) -> AnthropicProvider:
    settings = ProviderSettings(
        id="anthropic", model="claude-fake", options={"baseUrl": vendor.base_url, "maxRetries": 0}
    )
    return AnthropicProvider(
        settings, AuthEntry.model_validate({"type": "apiKey", "apiKey": SECRET})
    )


async def test_openai_text_round_trip(vendor: FakeVendor) -> None:
    vendor.reply(openai_text("Hello there"))
    provider = openai(vendor, maxTokens=50)
    result = await provider.complete(
        InferenceRequest([ChatMessage("user", "hi")], system_prompt="Be nice")
    )
    await provider.close()
    assert (
        result.text == "Hello there"
        and result.provider_id == "openai"
        and result.model == "gpt-fake"
    )
    assert (result.usage.input, result.usage.cache_read, result.usage.output) == (10, 2, 5)
    sent = vendor.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be nice"},
        {"role": "user", "content": "hi"},
    ]
    assert sent.body["max_tokens"] == 50


async def test_openai_tool_calls_both_ways(vendor: FakeVendor) -> None:
    call = {
        "id": "call_2",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
    }
    vendor.reply(openai_text("", tool_calls=[call]))
    provider = openai(vendor)
    result = await provider.complete(InferenceRequest(TOOL_EXCHANGE, tools=[WEATHER]))
    await provider.close()
    assert result.tool_calls == (ToolCall("call_2", "weather", {"city": "Rome"}),)
    body = vendor.requests[0].body
    assert body["tools"][0]["function"]["name"] == "weather"
    assistant, tool = body["messages"][1], body["messages"][2]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city": "Paris"}',
    }
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


async def test_openai_errors_become_provider_errors_without_the_key(vendor: FakeVendor) -> None:
    vendor.reply({"error": {"message": f"invalid key {SECRET[:6]}...", "type": "auth"}}, status=401)
    provider = openai(vendor)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(InferenceRequest([ChatMessage("user", "hi")]))
    await provider.close()
    assert "401" in str(caught.value) and SECRET not in str(caught.value)


async def test_openai_without_a_key_says_how_to_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderConfigError, match="claybot auth set openai apiKey"):
        OpenAIProvider(ProviderSettings(id="openai"), None)
    local_server = OpenAIProvider(
        ProviderSettings(id="ollama", options={"baseUrl": "http://127.0.0.1:1/v1"}), None
    )
    await local_server.close()


async def test_anthropic_text_and_usage(vendor: FakeVendor) -> None:
    vendor.reply(anthropic_message([{"type": "text", "text": "Bonjour"}]))
    provider = anthropic(vendor)
    result = await provider.complete(
        InferenceRequest([ChatMessage("user", "salut")], system_prompt="Be brief")
    )
    await provider.close()
    assert result.text == "Bonjour"
    assert (
        result.usage.input,
        result.usage.output,
        result.usage.cache_read,
        result.usage.cache_write,
    ) == (20, 7, 3, 1)
    sent = vendor.requests[0]
    assert sent.path == "/v1/messages"
    # SDK 2.x sends the key as a bearer token; older ones used x-api-key.
    presented = sent.headers.get("x-api-key") or sent.headers.get("authorization", "").removeprefix(
        "Bearer "
    )
    assert presented == SECRET
    assert sent.body["system"] == "Be brief" and sent.body["max_tokens"] == 1024


async def test_anthropic_tool_use_both_ways(vendor: FakeVendor) -> None:
    vendor.reply(
        anthropic_message(
            [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ]
        )
    )
    provider = anthropic(vendor)
    two_results = [
        *TOOL_EXCHANGE,
        ChatMessage("tool", "windy", tool_call_id="call_x", tool_name="weather", is_error=True),
    ]
    result = await provider.complete(InferenceRequest(two_results, tools=[WEATHER]))
    await provider.close()
    assert result.text == "Checking."
    assert result.tool_calls == (ToolCall("toolu_1", "weather", {"city": "Oslo"}),)
    body = vendor.requests[0].body
    assert body["tools"][0]["input_schema"] == WEATHER.parameters
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}}
    ]
    results = body["messages"][2]
    assert results["role"] == "user" and [b["tool_use_id"] for b in results["content"]] == [
        "call_1",
        "call_x",
    ]
    assert results["content"][1]["is_error"] is True


async def test_anthropic_server_error_is_a_provider_error(vendor: FakeVendor) -> None:
    vendor.reply(
        {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, status=529
    )
    provider = anthropic(vendor)
    with pytest.raises(ProviderError, match="529"):
        await provider.complete(InferenceRequest([ChatMessage("user", "hi")]))
    await provider.close()
