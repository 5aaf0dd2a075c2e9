"""Messages encoded once per vendor format: what a context keeps gives the same JSON as
encoding every message anew, and a call encodes only the messages that are new."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from claybot.agents.packed_context import PackedContext
from claybot.providers.anthropic_provider import (
    MESSAGES_CODEC,
    to_anthropic_messages,
    turns_json,
)
from claybot.providers.base import (
    AssistantMessage,
    Attachment,
    ChatMessage,
    InferenceRequest,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from claybot.providers.encoded import EncodedRun, MessageCodec, encode_messages, files_to_encode
from claybot.providers.openai_provider import messages_json, to_openai_messages
from tests.providers.test_request_bodies import IMAGE, PNG

TEXTS = st.sampled_from(["", "  ", "hi", "Zürich ✈", 'say "no"\n'])
PHOTO = Attachment("map.png", "image/png", len(PNG), str(IMAGE))
MESSAGES = st.one_of(
    st.builds(lambda text: UserMessage(text), TEXTS),
    st.builds(lambda text: UserMessage(text, files=(PHOTO,)), TEXTS),
    st.builds(lambda text: AssistantMessage(text), TEXTS),
    st.builds(
        lambda text, n: AssistantMessage(
            text, tool_calls=tuple(ToolCall(f"c{i}", "read", {"i": i}) for i in range(n))
        ),
        TEXTS,
        st.integers(1, 3),
    ),
    st.builds(
        lambda text, error: ToolMessage(
            tool_call_id="c0", tool_name="read", text=text, is_error=error
        ),
        TEXTS,
        st.booleans(),
    ),
)


def parsed(fragment: orjson.Fragment) -> Any:
    return json.loads(orjson.dumps(fragment))


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGES, max_size=12), st.sampled_from(["", "Be brief."]))
def test_kept_encodings_give_the_same_json(messages: list[ChatMessage], system: str) -> None:
    """Any run of messages: the turns regrouped from encoded messages are the turns
    built from the messages (Anthropic), and the array is the array (OpenAI)."""
    request = InferenceRequest(messages, system_prompt=system)
    anthropic = turns_json(encode_messages(MESSAGES_CODEC, messages))
    assert parsed(anthropic) == to_anthropic_messages(request)
    assert parsed(messages_json(request)) == to_openai_messages(request)


class CountingCodec:
    """The OpenAI format's encoding, counted."""

    key = "counting"

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, message: ChatMessage) -> tuple[int, bytes]:
        self.encoded.append(message.text)
        return 0, json.dumps(message.text).encode() + b","


def texts(run: EncodedRun) -> list[str]:
    return [json.loads(fragment[:-1]) for _, fragment in run.fragments()]


def say(n: int) -> list[ChatMessage]:
    return [UserMessage(f"q{n}"), AssistantMessage(f"a{n}")]


def test_a_call_encodes_only_what_is_new() -> None:
    codec = CountingCodec()
    counted: MessageCodec = codec
    context = PackedContext(say(0) + say(1))
    assert texts(context.window(100).encoded(counted)) == ["q0", "a0", "q1", "a1"]
    context.extend(say(2))
    assert texts(context.window(100).encoded(counted)) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert codec.encoded == ["q0", "a0", "q1", "a1", "q2", "a2"]  # each once

    # A window that starts later reads from the same kept encodings.
    assert texts(context.window(2).encoded(counted)) == ["q2", "a2"]
    assert len(codec.encoded) == 6


def test_trim_and_clear_keep_what_they_should() -> None:
    codec = CountingCodec()
    context = PackedContext(say(0) + say(1) + say(2))
    before = context.window(100)
    assert len(texts(before.encoded(codec))) == 6
    context.trim(4)  # q0 and a0 go
    assert texts(context.window(100).encoded(codec)) == ["q1", "a1", "q2", "a2"]
    assert len(codec.encoded) == 6  # the rest were kept, renumbered
    # A window taken before the trim is still what it was: encoded anew, not misread.
    assert texts(before.encoded(codec)) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    context.clear()
    context.extend(say(9))
    assert texts(context.window(100).encoded(codec)) == ["q9", "a9"]


def test_formats_are_kept_apart() -> None:
    context = PackedContext(say(0))
    counting = CountingCodec()
    assert texts(context.window(10).encoded(counting)) == ["q0", "a0"]
    run = context.window(10).encoded(MESSAGES_CODEC)
    assert parsed(turns_json(run)) == to_anthropic_messages(InferenceRequest(say(0)))


def test_files_are_read_off_the_loop_only_until_they_are_kept() -> None:
    """A provider encodes on a worker thread while images are waiting to be read."""
    codec = CountingCodec()
    context = PackedContext([UserMessage("look", files=(PHOTO,))])
    assert context.window(10).files_to_encode(codec)
    context.window(10).encoded(codec)
    assert not context.window(10).files_to_encode(codec)  # kept: nothing to read
    context.extend(say(1))
    assert not context.window(10).files_to_encode(codec)
    context.append(UserMessage("and this", files=(PHOTO,)))
    assert context.window(10).files_to_encode(codec)
    assert files_to_encode([UserMessage("x", files=(PHOTO,))], codec)
    assert not files_to_encode(say(2), codec)
