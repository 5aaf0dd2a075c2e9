"""What a provider call costs the engine, by context length (``bench/agents.py
--provider-overhead``).

Against an instant fake OpenAI-compatible and Anthropic-compatible server on loopback
(``fake_vendor.py``, a process of its own), for contexts of 10, 200 and 1,000 messages
(user messages, replies calling a tool, tool results, replies; the system prompt and 20
tool schemas), whole answers and streamed:

- **CPU per call**: the event loop's CPU time (``time.thread_time``) for one
  ``provider.complete`` on a fresh window of a packed context, as a turn takes it:
  building the body, the SDK, the HTTP exchange, reading the answer. The median of 200
  calls after 5 to warm up.
- **Through the engine** (streamed: a turn always streams): an engine whose one agent
  already holds the context (``agents.maxContextMessages`` is the context's length)
  gets 30 messages one at a time over its socket. *Posted to sent* is the time from
  sending a message until its request reaches the vendor (one clock,
  ``time.monotonic``); *engine CPU per turn* is the engine process's CPU over those
  turns (all of a turn: accepting the message, writing history, the call), divided by
  30.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import time

import psutil

from agents import RawClient, fresh_home, populate, start_engine
from claybot.agents.packed_context import PackedContext
from claybot.config.settings import ProviderSettings
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.base import (
    AssistantMessage,
    InferenceRequest,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from claybot.providers.openai_provider import OpenAIProvider
from fake_vendor import FakeVendor

CONTEXTS = (10, 200, 1000)
KINDS = ("openai", "anthropic")
CALLS = 200
WARM = 5
TURNS = 30
TURN_SETTLE_S = 0.05  # after its request reached the vendor, a turn ends within this
WARM_UP_S = 1.0
SYSTEM_PROMPT = "You are a careful assistant. Answer briefly and cite your sources. " * 10
TOOLS = tuple(
    ToolSchema(
        f"tool_{n}",
        f"Tool number {n}: reads, writes or looks something up for the user.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "where"},
                "limit": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
        },
    )
    for n in range(20)
)


def packed_context(messages: int) -> PackedContext:
    """``messages`` messages in rounds of four: a question, a reply calling a tool, the
    tool's result, the answer."""
    context = PackedContext()
    for n in range(messages // 4 + 1):
        round_ = [
            UserMessage(f"Question {n}: what does file {n} say about the budget?"),
            AssistantMessage(
                "Let me read it.",
                tool_calls=(
                    ToolCall(f"call_{n}", "tool_1", {"path": f"/data/file{n}.txt", "limit": 40}),
                ),
            ),
            ToolMessage(
                tool_call_id=f"call_{n}",
                tool_name="tool_1",
                text=f"Line {n}: the budget grew. " * 12,
            ),
            AssistantMessage(f"File {n} says the budget grew by {n} %. " * 3),
        ]
        for message in round_:
            if len(context) < messages:
                context.append(message)
    return context


def provider_for(kind: str, base_url: str) -> OpenAIProvider | AnthropicProvider:
    if kind == "openai":
        settings = ProviderSettings(id=kind, model="fake", options={"baseUrl": f"{base_url}/v1"})
        return OpenAIProvider(settings, None, {})
    settings = ProviderSettings(id=kind, model="fake", options={"baseUrl": base_url})
    return AnthropicProvider(settings, None, {})


async def cpu_per_call(base_url: str, kind: str, messages: int, streamed: bool) -> float:
    provider = provider_for(kind, base_url)
    context = packed_context(messages)
    spent = []
    try:
        for n in range(WARM + CALLS):
            request = InferenceRequest(
                messages=context.window(messages), system_prompt=SYSTEM_PROMPT, tools=TOOLS
            )
            started = time.thread_time()
            await provider.complete(request, (lambda _: None) if streamed else None)
            if n >= WARM:
                spent.append((time.thread_time() - started) * 1000)
    finally:
        await provider.close()
    return statistics.median(spent)


async def through_engine(
    vendor: FakeVendor, kind: str, messages: int
) -> tuple[float, float, float]:
    """Posted-to-sent p50 and p99 (ms), and the engine's CPU per turn (ms)."""
    base = f"{vendor.base_url}/v1" if kind == "openai" else vendor.base_url
    settings = {
        "providers": [{"id": kind, "type": kind, "model": "fake", "options": {"baseUrl": base}}],
        "agents": {"maxContextMessages": messages, "systemPrompt": SYSTEM_PROMPT},
    }
    paths = fresh_home(settings)
    paths.agents.mkdir(parents=True)
    populate(paths, 1, messages + 1)  # a start record and ``messages`` messages
    process, _ = start_engine(paths)
    client = RawClient(paths.socket)
    engine = psutil.Process(process.pid)

    async def turn(n: int) -> float:
        seen = len(await asyncio.to_thread(vendor.arrivals))
        body = {"userId": "user0", "channelId": "bench", "text": f"message {n}"}
        posted = time.monotonic()
        status, answer = await client.post("/v1/engine/messages", json.dumps(body).encode())
        if status != 202:
            raise RuntimeError(f"the engine answered {status}: {answer!r}")
        while True:
            arrivals = await asyncio.to_thread(vendor.arrivals)
            if len(arrivals) > seen:
                await asyncio.sleep(TURN_SETTLE_S)  # the turn ends: no polling meanwhile
                return (arrivals[seen] - posted) * 1000
            await asyncio.sleep(0.002)

    try:
        await turn(-1)  # the first turn loads the context from history
        await asyncio.sleep(WARM_UP_S)  # and what it set going (the SDK's first call) ends
        cpu = engine.cpu_times()
        delays = sorted([await turn(n) for n in range(TURNS)])
        after = engine.cpu_times()
        # The waits between turns poll only the vendor: the engine is idle then.
        spent = (after.user + after.system - cpu.user - cpu.system) * 1000 / TURNS
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(paths.home, ignore_errors=True)
    return statistics.median(delays), delays[int(len(delays) * 0.99) - 1], spent


async def run_provider_overhead() -> None:
    rows: list[tuple[str, str, int, float, str]] = []
    with FakeVendor() as vendor:
        for kind in KINDS:
            for messages in CONTEXTS:
                for streamed in (False, True):
                    cpu = await cpu_per_call(vendor.base_url, kind, messages, streamed)
                    if streamed:
                        p50, p99, per_turn = await through_engine(vendor, kind, messages)
                        engine = f"{p50:.1f} ms | {p99:.1f} ms | {per_turn:.1f} ms"
                    else:
                        engine = "— | — | —"
                    rows.append((kind, "streamed" if streamed else "whole", messages, cpu, engine))
    print("\nProvider overhead: engine CPU per call, and posted-to-sent through the engine\n")
    print(
        "| provider | answer | context | CPU per call | posted to sent p50 | p99 "
        "| engine CPU per turn |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind, mode, messages, cpu, engine in rows:
        print(f"| {kind} | {mode} | {messages:,} | {cpu:.2f} ms | {engine} |")


def main() -> None:
    os.environ.pop("OPENAI_API_KEY", None)  # the fake needs none; a real one must not go there
    os.environ.pop("ANTHROPIC_API_KEY", None)
    asyncio.run(run_provider_overhead())


if __name__ == "__main__":
    main()
