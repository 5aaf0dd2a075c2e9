"""The openai provider against a fake server speaking the Chat Completions API."""

from __future__ import annotations

import socket

import pytest

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
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
from claybot.providers.openai_provider import OpenAIProvider, max_tokens_field
from claybot.providers.options import PLACEHOLDER_KEY
from claybot.providers.registry import ProviderRegistry, builtin_provider_types
from tests.providers.conftest import NO_ENV, SECRET, api_key
from tests.providers.fake_openai import FakeOpenAI

WEATHER = ToolSchema(
    "weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}}
)
HI = InferenceRequest([UserMessage("hi")])


async def test_text_round_trip(fake_openai: FakeOpenAI, openai_provider: OpenAIProvider) -> None:
    fake_openai.reply_text("Hello there")
    result = await openai_provider.complete(
        InferenceRequest([UserMessage("hi")], system_prompt="Be nice")
    )
    assert (result.text, result.provider_id, result.model) == ("Hello there", "openai", "gpt-fake")
    sent = fake_openai.requests[0]
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.body["model"] == "gpt-fake"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be nice"},
        {"role": "user", "content": "hi"},
    ]
    # A custom base URL means a compatible server: the widely known field name.
    assert sent.body["max_tokens"] == 50 and "tools" not in sent.body


async def test_usage_counts_cached_prompt_tokens_apart(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    fake_openai.reply_text("one")  # 12 prompt tokens of which 2 cached, 5 completion
    fake_openai.reply_text("two", usage=None)  # local servers may send no usage at all
    first = await openai_provider.complete(HI)
    second = await openai_provider.complete(HI)
    assert first.usage == TokenUsage(input=10, output=5, cache_read=2)
    assert first.usage.total == 17
    assert second.usage == TokenUsage()


async def test_tool_calls_both_ways(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    fake_openai.reply_tool_calls(
        ("call_2", "weather", {"city": "Rome"}), ("call_3", "weather", '{"city": "Ro'), text="Hm."
    )
    history = [
        UserMessage("weather in Paris and Oslo?"),
        AssistantMessage(
            "Checking.",
            tool_calls=(
                ToolCall("call_1", "weather", {"city": "Paris"}),
                ToolCall("call_1b", "weather", {"city": "Oslo"}),
            ),
        ),
        ToolMessage(tool_call_id="call_1", tool_name="weather", text="sunny"),
        ToolMessage(tool_call_id="call_1b", tool_name="weather", text="no data", is_error=True),
    ]
    result = await openai_provider.complete(InferenceRequest(history, tools=[WEATHER]))

    assert result.text == "Hm."
    assert result.tool_calls == (
        ToolCall("call_2", "weather", {"city": "Rome"}),
        # Arguments that are not valid JSON are handed over as written.
        ToolCall("call_3", "weather", {"_raw": '{"city": "Ro'}),
    )
    body = fake_openai.last_body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather for a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_1b",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_1b", "content": "Error: no data"},
    ]


async def test_a_vendor_error_is_a_provider_error_without_the_key(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    # Vendors echo (part of) a rejected key; ours must not reach logs or the user.
    fake_openai.reply_error(401, f"Incorrect API key provided: {SECRET}", "invalid_api_key")
    with pytest.raises(ProviderError) as caught:
        await openai_provider.complete(HI)
    message = str(caught.value)
    assert message.startswith("openai: HTTP 401: Incorrect API key provided")
    assert SECRET not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_server_errors_and_unreachable_servers_are_provider_errors(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    fake_openai.reply_error(500, "upstream exploded", "server_error")
    with pytest.raises(ProviderError, match="HTTP 500: upstream exploded"):
        await openai_provider.complete(HI)

    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        settings = ProviderSettings(
            id="ollama",
            type="openai",
            options={"baseUrl": f"http://127.0.0.1:{port}/v1", "maxRetries": 0},
        )
        provider = OpenAIProvider(settings, api_key(), env=NO_ENV)
        with pytest.raises(ProviderError, match=f"cannot reach http://127.0.0.1:{port}"):
            await provider.complete(HI)
        await provider.close()


def test_without_a_key_it_says_how_to_set_one() -> None:
    with pytest.raises(
        ProviderConfigError, match=r"claybot auth set openai apiKey .*OPENAI_API_KEY"
    ):
        OpenAIProvider(ProviderSettings(id="openai"), None, env=NO_ENV)


async def test_an_environment_key_only_goes_to_its_own_endpoint(fake_openai: FakeOpenAI) -> None:
    env = {"OPENAI_API_KEY": "sk-from-env", "OPENAI_BASE_URL": fake_openai.api_base}
    cases: list[tuple[dict[str, object], AuthEntry | None, str]] = [
        ({}, api_key("sk-from-auth"), "sk-from-auth"),
        ({}, None, "sk-from-env"),  # the variables' endpoint, with the variables' key
        # An entry for some other server must not receive the OpenAI key.
        ({"baseUrl": fake_openai.api_base}, None, PLACEHOLDER_KEY),
    ]
    for options, auth, expected in cases:
        fake_openai.reply_text("ok")
        provider = OpenAIProvider(ProviderSettings(id="openai", options=options), auth, env=env)
        await provider.complete(HI)
        await provider.close()
        assert fake_openai.requests[-1].headers["authorization"] == f"Bearer {expected}"


def test_the_official_api_gets_the_current_max_tokens_field() -> None:
    assert max_tokens_field("https://api.openai.com/v1") == "max_completion_tokens"
    assert max_tokens_field("https://openrouter.ai/api/v1") == "max_tokens"
    assert max_tokens_field("http://127.0.0.1:11434/v1") == "max_tokens"


async def test_a_local_server_needs_no_key(fake_openai: FakeOpenAI) -> None:
    # Built the way the engine builds it: through the registry, with the engine's
    # environment (here one without OPENAI_API_KEY).
    settings = ProviderSettings(
        id="ollama",
        type="openai",
        model="llama3.2",
        options={"baseUrl": fake_openai.api_base, "temperature": 0.2},
    )
    provider = ProviderRegistry(builtin_provider_types()).create(settings, None, {})
    fake_openai.reply_text("hi from ollama")
    result = await provider.complete(HI)
    await provider.close()
    assert result.text == "hi from ollama" and result.provider_id == "ollama"
    sent = fake_openai.requests[0]
    assert sent.headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    assert sent.body["model"] == "llama3.2" and sent.body["temperature"] == 0.2


def test_bad_options_are_refused_with_the_field_named() -> None:
    settings = ProviderSettings(id="openai", options={"timeoutS": "soon"})
    with pytest.raises(ProviderConfigError, match=r"options\.timeoutS must be a float, got 'soon'"):
        OpenAIProvider(settings, api_key(), env=NO_ENV)
