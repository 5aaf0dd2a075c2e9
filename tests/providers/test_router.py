"""Provider order and fall-through, and building providers from settings."""

from __future__ import annotations

import asyncio

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.base import (
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    UserMessage,
)
from claybot.providers.openai_provider import OpenAIProvider
from claybot.providers.registry import ProviderRegistry, builtin_provider_types
from claybot.providers.router import InferenceFailed, InferenceRouter
from claybot.providers.scripted import ScriptedProvider
from tests.providers.conftest import SECRET
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI

PING = InferenceRequest([UserMessage("ping")])


def scripted(provider_id: str, model: str, **options: object) -> ScriptedProvider:
    return ScriptedProvider(ProviderSettings(id=provider_id, model=model, options=options))


async def test_a_failing_provider_falls_through_to_the_next() -> None:
    second = scripted("second", "echo")
    router = InferenceRouter([scripted("first", "fail"), second])
    result = await router.complete(PING)
    assert (result.text, result.provider_id) == ("echo: ping", "second")
    assert second.requests == [PING]


async def test_a_vendor_error_falls_through_to_the_next_vendor(
    fake_openai: FakeOpenAI,
    openai_provider: OpenAIProvider,
    fake_anthropic: FakeAnthropic,
    anthropic_provider: AnthropicProvider,
) -> None:
    fake_openai.reply_error(503, "overloaded", "server_error")
    fake_anthropic.reply_text("from claude")
    result = await InferenceRouter([openai_provider, anthropic_provider]).complete(PING)
    assert (result.text, result.provider_id) == ("from claude", "anthropic")
    assert len(fake_openai.requests) == 1 and len(fake_anthropic.requests) == 1


async def test_when_all_fail_every_reason_is_listed(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider
) -> None:
    fake_openai.reply_error(401, f"bad key {SECRET}", "invalid_api_key")
    router = InferenceRouter(
        [scripted("a", "fail"), openai_provider, scripted("b", "script", responses=[])]
    )
    with pytest.raises(InferenceFailed) as caught:
        await router.complete(PING)
    failures = dict(caught.value.failures)
    assert list(failures) == ["a", "openai", "b"]
    assert "always fails" in failures["a"] and "no responses left" in failures["b"]
    assert "HTTP 401" in failures["openai"] and SECRET not in str(caught.value)


async def test_no_provider_at_all_is_a_failure_too() -> None:
    with pytest.raises(InferenceFailed, match="no provider is configured"):
        await InferenceRouter([]).complete(PING)


def test_the_registry_knows_the_builtins_and_names_unknown_types() -> None:
    registry = ProviderRegistry(builtin_provider_types())
    labels = {t.type: t.label for t in registry.types()}
    assert labels == {
        "scripted": "Scripted",
        "openai": "OpenAI-compatible",
        "anthropic": "Anthropic",
        "local": "Local (llama.cpp SmolLM2-135M)",
    }
    with pytest.raises(ProviderConfigError, match="unknown provider type 'nope'"):
        registry.create(ProviderSettings(id="x", type="nope"), None, {})


def test_the_local_provider_is_created_without_loading_anything() -> None:
    # The engine builds providers at boot; the model must wait for the first message.
    registry = ProviderRegistry(builtin_provider_types())
    provider = registry.create(ProviderSettings(id="local"), None, {})
    assert provider.id == "local" and provider.model == "SmolLM2-135M-Instruct"


class Held:
    """A provider whose answer waits for the test, and which knows when it is closed."""

    id = model = "held"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.closed = False

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        self.started.set()
        await self.release.wait()
        if self.closed:
            raise ProviderError(self.id, "closed under a call")
        return InferenceResult(text="held answer", provider_id=self.id, model=self.model)

    async def close(self) -> None:
        self.closed = True


async def test_providers_replaced_under_a_call_close_once_it_ends() -> None:
    """A rebuild (settings changed, or the engine's second build at start) must not close
    a provider a call is using: the call would fall through to the next provider."""
    held, fallback, new = Held(), scripted("fallback", "echo"), scripted("new", "echo")
    router = InferenceRouter([held, fallback])  # type: ignore[list-item]
    call = asyncio.ensure_future(router.complete(PING))
    await held.started.wait()
    await router.replace([new])
    assert not held.closed
    assert (await router.complete(PING)).provider_id == "new"  # new calls go to the new list
    held.release.set()
    result = await call
    assert (result.text, result.provider_id) == ("held answer", "held")
    async with asyncio.timeout(5):
        while not held.closed:  # closed by the call's end, in a task of its own
            await asyncio.sleep(0)
    idle = Held()
    await router.replace([idle])  # type: ignore[list-item]
    await router.replace([new])
    assert idle.closed  # no call ran over it: closed at once
