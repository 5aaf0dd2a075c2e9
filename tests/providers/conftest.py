"""Fake vendors on loopback, and providers wired to them with a known key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.openai_provider import OpenAIProvider
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

SECRET = "sk-test-secret-0123456789abcdef"
NO_ENV: dict[str, str] = {}


def api_key(value: str = SECRET) -> AuthEntry:
    return AuthEntry.model_validate({"type": "apiKey", "apiKey": value})


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        yield vendor


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    vendor = FakeAnthropic()
    with LoopbackServer(vendor):
        yield vendor


@pytest.fixture
async def openai_provider(fake_openai: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    settings = ProviderSettings(
        id="openai",
        model="gpt-fake",
        options={"baseUrl": fake_openai.api_base, "maxRetries": 0, "maxTokens": 50},
    )
    provider = OpenAIProvider(settings, api_key(), env=NO_ENV)
    yield provider
    await provider.close()


@pytest.fixture
async def anthropic_provider(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    settings = ProviderSettings(
        id="anthropic",
        model="claude-fake",
        options={"baseUrl": fake_anthropic.api_base, "maxRetries": 0},
    )
    provider = AnthropicProvider(settings, api_key(), env=NO_ENV)
    yield provider
    await provider.close()
