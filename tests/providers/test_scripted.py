"""The scripted provider's models: echo, script and fail."""

from __future__ import annotations

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    AssistantMessage,
    InferenceRequest,
    ProviderConfigError,
    ProviderError,
    UserMessage,
)
from claybot.providers.scripted import ScriptedProvider

REQUEST = InferenceRequest([UserMessage("first"), AssistantMessage("ok"), UserMessage("ping")])


def scripted(model: str | None, **options: object) -> ScriptedProvider:
    return ScriptedProvider(ProviderSettings(id="scripted", model=model, options=options))


async def test_echo_repeats_the_last_user_message() -> None:
    provider = scripted(None)  # echo is the default
    result = await provider.complete(REQUEST)
    assert (result.text, result.provider_id, result.model) == ("echo: ping", "scripted", "echo")
    assert result.usage.output > 0


async def test_script_plays_text_and_tool_calls_in_order_then_fails() -> None:
    provider = scripted(
        "script",
        responses=[
            "first",
            {"text": "", "toolCalls": [{"name": "clock", "arguments": {"tz": "UTC"}}]},
        ],
    )
    assert (await provider.complete(REQUEST)).text == "first"
    second = await provider.complete(REQUEST)
    assert second.tool_calls[0].name == "clock" and second.tool_calls[0].arguments == {"tz": "UTC"}
    assert second.tool_calls[0].id  # the tool loop needs an id even when the script has none
    with pytest.raises(ProviderError, match="no responses left"):
        await provider.complete(REQUEST)


async def test_fail_always_fails() -> None:
    with pytest.raises(ProviderError, match="scripted: the scripted 'fail' model always fails"):
        await scripted("fail").complete(REQUEST)


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ProviderConfigError, match="unknown scripted model 'nonsense'"):
        scripted("nonsense")
    with pytest.raises(ProviderConfigError, match=r"options\.responses"):
        scripted("script", responses=[{"text": "no name", "toolCalls": [{}]}])
