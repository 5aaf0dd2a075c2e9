"""The OpenAI door's parts that need no engine: what a request says, what the agent holds
already, how a stream completes a reply's text, and the watch on a turn's events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from claybot.api.openai.bodies import ChatMessage
from claybot.api.openai.conversation import (
    Exchange,
    Held,
    ModelNotFound,
    NoNewMessage,
    UnsupportedContent,
    already_held,
    channel_of,
    named_agent,
    read_conversation,
)
from claybot.api.openai.turn import FALLBACK_MARK, StreamedText, TurnWatch, turn_facts
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus


def conversation(*pairs: tuple[str, Any]) -> list[ChatMessage]:
    return [ChatMessage(role=role, content=content) for role, content in pairs]  # type: ignore[arg-type]


def test_new_messages_are_the_user_messages_after_the_last_assistant_message() -> None:
    request = read_conversation(
        conversation(
            ("system", "Be brief."),
            ("user", "Hi"),
            ("assistant", "Hello"),
            ("user", "One"),
            ("tool", "ignored"),
            ("user", [{"type": "text", "text": "Two"}, {"type": "text", "text": "lines"}]),
            ("user", "  "),
        )
    )
    assert request.new == ["One", "Two\nlines"]
    assert request.last == Exchange("Hi", "Hello")


def test_a_first_request_has_no_exchange_and_earlier_images_do_not_matter() -> None:
    assert read_conversation(conversation(("user", "Hi"))).last is None
    image = [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]
    request = read_conversation(
        conversation(("user", image), ("assistant", "A cat."), ("user", "Thanks"))
    )
    assert request.new == ["Thanks"]
    assert request.last is None  # what was said before the reply was no text
    with pytest.raises(UnsupportedContent) as refused:
        read_conversation(conversation(("user", image)))
    assert refused.value.field == "messages.0.content.0"
    assert "does not fetch" in str(refused.value)


@pytest.mark.parametrize(
    "messages",
    [
        [("user", "Hi"), ("assistant", "Hello")],
        [("system", "Be brief.")],
        [("assistant", "Hello"), ("tool", "x")],
        [("user", "")],
        [("user", None)],
    ],
)
def test_nothing_new_to_say_is_refused(messages: list[tuple[str, Any]]) -> None:
    with pytest.raises(NoNewMessage):
        read_conversation(conversation(*messages))


def test_model_names() -> None:
    assert named_agent("claybot") is None
    assert named_agent("agent:abc") == "abc"
    for unknown in ("gpt-4o", "agent:", "Claybot", "abc"):
        with pytest.raises(ModelNotFound):
            named_agent(unknown)


def test_a_user_the_directory_cannot_hold_is_hashed_the_same_every_time() -> None:
    assert channel_of(None) == channel_of("") == "default"
    assert channel_of("alice@example.com") == "alice@example.com"
    for awkward in ("org/alice", "tab\there", "x" * 500):
        assert channel_of(awkward).startswith("user-")
        assert channel_of(awkward) == channel_of(awkward)
    assert channel_of("org/alice") != channel_of("org/bob")


def said(message_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "user_message", "messageId": message_id, "text": text, **extra}


def replied(message_id: str, text: str, n: int = 0) -> dict[str, Any]:
    return {
        "type": "assistant_message",
        "messageId": message_id,
        "text": text,
        "outgoingId": f"{message_id}#{n}",
    }


# The agent heard "Hi" (answered "OK"), "Take note" (answered "OK" too), then "More".
RECORDS = [
    {"type": "start"},
    said("m1", "Hi"),
    replied("m1", "OK"),
    said("m2", "Take note"),
    {"type": "assistant_message", "messageId": "m2", "text": "", "toolCalls": [{"id": "c"}]},
    {"type": "tool_result", "messageId": "m2", "toolCallId": "c"},
    replied("m2", "Looked.", 0),
    replied("m2", "OK", 1),
    said("m3", "More"),
]


def held(*messages: tuple[str, Any]) -> Held:
    return already_held(RECORDS, read_conversation(conversation(*messages)))


def test_a_retry_finds_the_exchange_by_what_was_said_and_answered() -> None:
    # "OK" answers two turns: the message before it tells which.
    assert held(("user", "Hi"), ("assistant", "OK"), ("user", "Take note")) == Held(1, "m2")
    assert held(("user", "Hi"), ("assistant", "OK"), ("user", "Take note"), ("user", "More")) == (
        Held(2, "m3")
    )
    assert held(
        ("user", "Hi"),
        ("assistant", "OK"),
        ("user", "Take note"),
        ("assistant", "Looked.\n\nOK"),
        ("user", "More"),
        ("user", "And more"),
    ) == Held(1, "m3")


def test_messages_the_agent_did_not_hear_after_that_exchange_are_new() -> None:
    # Said again after its own answer: the user means it again.
    assert held(
        ("user", "Take note"), ("assistant", "Looked.\n\nOK"), ("user", "Take note")
    ) == Held(0, None)
    assert held(("user", "Hi"), ("assistant", "OK"), ("user", "Something else")) == Held(0, None)
    # An edited exchange, or a reply the agent never gave, anchors nothing.
    assert held(("user", "Hi!"), ("assistant", "OK"), ("user", "Take note")) == Held(0, None)
    assert held(("user", "Hi"), ("assistant", "Fine"), ("user", "Take note")) == Held(0, None)


def test_messages_said_together_are_matched_together() -> None:
    records = [said("m1", "Hi"), replied("m1", "OK"), said("m2", "One\n\nTwo")]
    request = read_conversation(
        conversation(("user", "Hi"), ("assistant", "OK"), ("user", "One"), ("user", "Two"))
    )
    assert already_held(records, request) == Held(2, "m2")
    request = read_conversation(
        conversation(("user", "Hi"), ("assistant", "OK"), ("user", "One"), ("user", "Three"))
    )
    assert already_held(records, request) == Held(0, None)


def test_notices_the_agent_got_from_elsewhere_are_not_a_persons_messages() -> None:
    records = [said("m1", "Hi"), replied("m1", "OK"), said("n1", "Take note", origin="cron")]
    request = read_conversation(
        conversation(("user", "Hi"), ("assistant", "OK"), ("user", "Take note"))
    )
    assert already_held(records, request) == Held(0, None)


def test_a_stream_completes_each_reply_with_what_was_not_streamed() -> None:
    text = StreamedText()
    sent = [text.delta("m#0", "Let me "), text.delta("m#0", "look.")]
    sent.append(text.final("m#0", "Let me look."))
    sent.append(text.final("m#1", "Only you."))  # never streamed: sent whole
    sent.append(text.delta("m#1", "late"))  # a delta after its final text is dropped
    assert "".join(sent) == "Let me look.\n\nOnly you."
    assert text.final("m#1", "Only you.") == ""


def test_a_final_text_with_a_notice_sends_only_the_notice() -> None:
    text = StreamedText()
    assert text.delta("m#0", "Partial") == "Partial"
    assert text.final("m#0", "Partial\n\n[Stopped.]") == "\n\n[Stopped.]"


def test_a_provider_fallback_voids_what_was_streamed_and_says_so() -> None:
    text = StreamedText()
    sent = [text.delta("m#0", "The first provi")]
    sent.append(text.void())
    sent += [text.delta("m#0", "The second "), text.delta("m#0", "answer.")]
    sent.append(text.final("m#0", "The second answer."))
    assert "".join(sent) == "The first provi" + FALLBACK_MARK + "The second answer."
    assert StreamedText().void() == ""  # nothing streamed: nothing to take back


def test_turn_facts_read_tool_calls_results_and_usage_of_one_turn() -> None:
    size = {"input": 10, "output": 4, "cacheRead": 5, "cacheWrite": 1, "total": 20}
    records = [
        said("m1", "Hi"),
        {
            "type": "assistant_message",
            "messageId": "m1",
            "text": "",
            "toolCalls": [{"id": "c1", "name": "clock", "arguments": {"zone": "UTC"}}],
            "tokens": {"provider": "p", "model": "x", "size": size},
        },
        {
            "type": "tool_result",
            "messageId": "m1",
            "toolCallId": "c1",
            "toolName": "clock",
            "output": {"text": "noon", "isError": False},
        },
        {**replied("m1", "Noon."), "tokens": None},
        {**replied("m0", "Other turn."), "tokens": {"size": size}},
    ]
    facts = turn_facts(records, "m1")
    assert facts.tool_calls == [
        {
            "id": "c1",
            "name": "clock",
            "arguments": '{"zone": "UTC"}',
            "result": {"text": "noon", "isError": False},
        }
    ]
    assert facts.usage.to_openai() == {
        "prompt_tokens": 16, "completion_tokens": 4, "total_tokens": 20,
    }  # fmt: skip


def outgoing(message_id: str, n: int, *, final: bool) -> dict[str, Any]:
    message = {
        "id": f"{message_id}#{n}", "agentId": "a", "connector": "openai", "userId": "u",
        "channelId": "c", "text": "t", "inReplyTo": message_id, "final": final,
    }  # fmt: skip
    return {"agentId": "a", "message": message}


async def test_a_watch_keeps_its_turns_events_and_leaves_with_its_last_reply() -> None:
    bus = EventBus()
    watch = TurnWatch(bus, "m1")
    bus.emit(EventType.AGENT_OUTGOING, outgoing("m0", 0, final=True))  # another turn's
    delta = {"agentId": "a", "messageId": "m1", "outgoingId": "m1#0", "text": "t"}
    bus.emit(EventType.AGENT_DELTA, delta)
    bus.emit(EventType.AGENT_OUTGOING, outgoing("m1", 0, final=False))
    assert bus._listeners  # still there after a reply that is not the last
    await asyncio.sleep(0)
    assert bus._listeners
    bus.emit(EventType.AGENT_OUTGOING, outgoing("m1", 1, final=True))
    await asyncio.sleep(0)
    # Gone by itself, should no stream read it (a client that left before it started).
    assert bus._listeners == []
    assert [event.type for event in watch.take()] == [
        "agent.delta", "agent.outgoing", "agent.outgoing",
    ]  # fmt: skip
    watch.close()  # and closing it again is harmless
