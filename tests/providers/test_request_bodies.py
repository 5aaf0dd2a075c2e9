"""The providers send their request bodies through the SDK's own ``post`` (no per-call
transform of the body, each message's JSON kept by the agent's context): what reaches
the vendor is what the SDK's ``create`` would have sent for the same arguments (the
same JSON, as long, with the same headers), streamed or not, whether the messages come
as a list or as a context window that encoded some of them on an earlier call.

The turn has everything a body can hold: a system prompt, tools, tool calls and their
results, and an image the user sent (an image part for both vendors)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from claybot.agents.packed_context import PackedContext
from claybot.providers.anthropic_provider import AnthropicProvider
from claybot.providers.base import (
    AssistantMessage,
    Attachment,
    InferenceRequest,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from claybot.providers.openai_provider import OpenAIProvider
from tests.providers.fake_anthropic import FakeAnthropic
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import RecordedRequest

WEATHER = ToolSchema(
    "weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
READ = ToolSchema(
    "read",
    "Read lines of a file",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}},
        },
    },
)
# A one-pixel PNG, in a file as an agent's folder holds one.
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00"
    b"\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05"
    b"\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)
IMAGE = Path(tempfile.mkdtemp(prefix="claybot-bodies-")) / "map.png"
IMAGE.write_bytes(PNG)
# A turn with every kind of message: a system prompt, text beyond ASCII, control
# characters, an image, a reply that calls two tools (nested, float and null
# arguments), their results (one an error), and the conversation going on after them.
RICH = InferenceRequest(
    messages=[
        UserMessage(
            'Plan my trip to Zürich ✈, "quoted"\n\tand <tagged>',
            files=(Attachment("map.png", "image/png", len(PNG), str(IMAGE)),),
        ),
        AssistantMessage(
            "Let me look.",
            tool_calls=(
                ToolCall("call_1", "weather", {"city": "Zürich"}),
                ToolCall(
                    "call_2",
                    "read",
                    {"path": "/tmp/ü.txt", "lines": [1, 2], "deep": {"x": 1.5, "y": None}},
                ),
            ),
        ),
        ToolMessage(tool_call_id="call_1", tool_name="weather", text="12 °C, rain"),
        ToolMessage(tool_call_id="call_2", tool_name="read", text="no such file", is_error=True),
        AssistantMessage("It rains; pack a coat."),
        UserMessage("thanks \u2028 bye"),
    ],
    system_prompt="You are careful.\nAnswer briefly.",
    tools=(WEATHER, READ),
    max_output_tokens=300,
)
# Headers that say how a request was sent, not what it carries.
PER_SEND = {"x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-timeout"}


def same_request(ours: RecordedRequest, sdks: RecordedRequest) -> None:
    assert ours.path == sdks.path
    assert ours.body == sdks.body
    # The same keys in another order: ours are the order the body is built in.
    assert len(ours.raw) == len(sdks.raw)  # no escape or number written differently
    assert {k: v for k, v in ours.headers.items() if k not in PER_SEND} == {
        k: v for k, v in sdks.headers.items() if k not in PER_SEND
    }


async def send_ours(
    provider: OpenAIProvider | AnthropicProvider, source: str, streamed: bool
) -> int:
    """RICH sent by the provider: its messages as a plain list, or as an agent's context
    window whose first messages were encoded by an earlier call (that call is sent too).
    Returns how many requests it sent."""
    on_delta = (lambda _: None) if streamed else None
    if source == "list":
        await provider.complete(RICH, on_delta)
        return 1
    context = PackedContext(RICH.messages[:2])
    await provider.complete(replace(RICH, messages=context.window(100)), on_delta)
    context.extend(RICH.messages[2:])
    await provider.complete(replace(RICH, messages=context.window(100)), on_delta)
    return 2


async def consume(stream: Any) -> None:
    async with stream:
        async for _ in stream:
            pass


@pytest.mark.parametrize("source", ["list", "context"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_openai_bodies_are_the_sdks(
    fake_openai: FakeOpenAI, openai_provider: OpenAIProvider, streamed: bool, source: str
) -> None:
    for _ in range(3):
        fake_openai.reply_text("fine")
    sent = await send_ours(openai_provider, source, streamed)
    arguments = openai_provider.request_body(RICH, stream=streamed)
    # The SDK's own way, through the same client (a private attribute: the test's only).
    answer = await openai_provider._client.chat.completions.create(**arguments)
    if streamed:
        await consume(answer)
    ours, sdks = fake_openai.requests[sent - 1 :]
    same_request(ours, sdks)
    assert [message["role"] for message in ours.body["messages"]] == [
        "system", "user", "assistant", "tool", "tool", "assistant", "user"
    ]  # fmt: skip
    image = ours.body["messages"][1]["content"][1]
    assert image["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")


@pytest.mark.parametrize("source", ["list", "context"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_anthropic_bodies_are_the_sdks(
    fake_anthropic: FakeAnthropic,
    anthropic_provider: AnthropicProvider,
    streamed: bool,
    source: str,
) -> None:
    for _ in range(3):
        fake_anthropic.reply_text("fine")
    sent = await send_ours(anthropic_provider, source, streamed)
    arguments = anthropic_provider.request_body(RICH, stream=streamed)
    answer = await anthropic_provider._client.messages.create(**arguments)
    if streamed:
        await consume(answer)
    ours, sdks = fake_anthropic.requests[sent - 1 :]
    same_request(ours, sdks)
    assert ours.body["system"] == RICH.system_prompt
    image = ours.body["messages"][0]["content"][0]
    assert image["source"]["media_type"] == "image/png"
    assert image["source"]["data"].startswith("iVBORw0KGgo")
    assert [turn["role"] for turn in ours.body["messages"]] == [
        "user", "assistant", "user", "assistant", "user"
    ]  # fmt: skip
