from __future__ import annotations

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.base import ChatMessage, InferenceRequest, ProviderConfigError
from claybot.providers.registry import ProviderRegistry, builtin_provider_types
from claybot.providers.router import InferenceFailed, InferenceRouter
from claybot.providers.scripted import ScriptedProvider

REQUEST = InferenceRequest([ChatMessage("user", "ping")])


def scripted(provider_id: str, model: str, **options: object) -> ScriptedProvider:
    return ScriptedProvider(ProviderSettings(id=provider_id, model=model, options=options))


async def test_a_failing_provider_falls_through_to_the_next() -> None:
    router = InferenceRouter([scripted("first", "fail"), scripted("second", "echo")])
    result = await router.complete(REQUEST)
    assert result.text == "echo: ping" and result.provider_id == "second"


async def test_when_all_fail_every_reason_is_listed() -> None:
    router = InferenceRouter([scripted("a", "fail"), scripted("b", "script", responses=[])])
    with pytest.raises(InferenceFailed) as caught:
        await router.complete(REQUEST)
    assert [provider for provider, _ in caught.value.failures] == ["a", "b"]


async def test_the_script_model_plays_text_and_tool_calls_in_order() -> None:
    provider = scripted(
        "s",
        "script",
        responses=[
            "first",
            {"text": "", "toolCalls": [{"name": "clock", "arguments": {"tz": "UTC"}}]},
        ],
    )
    assert (await provider.complete(REQUEST)).text == "first"
    second = await provider.complete(REQUEST)
    assert second.tool_calls[0].name == "clock" and second.tool_calls[0].arguments == {"tz": "UTC"}


def test_the_registry_names_unknown_types() -> None:
    registry = ProviderRegistry(builtin_provider_types())
    assert {t.type for t in registry.types()} == {"scripted", "openai", "anthropic", "local"}
    with pytest.raises(ProviderConfigError, match="unknown provider type 'nope'"):
        registry.create(ProviderSettings(id="x", type="nope"), None)
    with pytest.raises(ProviderConfigError, match="unknown scripted model"):
        registry.create(ProviderSettings(id="scripted", model="nonsense"), None)
