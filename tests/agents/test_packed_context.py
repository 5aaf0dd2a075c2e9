"""The packed context holds what a list of messages would, and windows it the same way."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claybot.agents.packed_context import PackedContext
from claybot.providers.base import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

CALL = ToolCall("c1", "note", {"note": "milk", "nested": {"n": [1, 2.5, None, True]}})
MESSAGES = [
    UserMessage("remember milk ✓"),
    AssistantMessage("on it", tool_calls=(CALL,)),
    ToolMessage(tool_call_id="c1", tool_name="note", text="noted", is_error=True),
    AssistantMessage(""),
]


def reference_window(messages: Sequence[ChatMessage], limit: int) -> list[ChatMessage]:
    """The last ``limit`` messages, from the first user message among them."""
    if len(messages) <= limit:
        return list(messages)
    start = len(messages) - limit
    while start < len(messages) and messages[start].role != "user":
        start += 1
    return list(messages[start:])


def test_every_field_of_every_kind_of_message_comes_back() -> None:
    context = PackedContext(MESSAGES)
    assert list(context) == MESSAGES
    window = context.window(10)
    assert [window[i] for i in range(len(window))] == MESSAGES
    assert window[-1] == MESSAGES[-1]
    assert window[1:3] == MESSAGES[1:3]
    assert list(reversed(window)) == MESSAGES[::-1]
    with pytest.raises(IndexError):
        window[4]
    with pytest.raises(IndexError):
        window[-5]


def test_a_window_starts_at_a_user_message_and_stays_as_it_was_taken() -> None:
    context = PackedContext([*MESSAGES, UserMessage("and eggs"), *MESSAGES[1:]])
    window = context.window(5)  # would start at the tool result: starts at "and eggs"
    assert [m.text for m in window] == ["and eggs", "on it", "noted", ""]
    context.append(UserMessage("later"))
    context.trim(1)
    assert [m.text for m in window] == ["and eggs", "on it", "noted", ""]
    assert list(context) == [UserMessage("later")]


def test_a_window_with_no_user_message_in_reach_is_empty() -> None:
    context = PackedContext([MESSAGES[0], *MESSAGES[1:] * 3])
    assert list(context.window(4)) == []


def test_equal_contexts_compare_equal_and_clear_empties() -> None:
    context = PackedContext(MESSAGES)
    assert context == PackedContext(MESSAGES)
    assert context != PackedContext(MESSAGES[:2])
    context.clear()
    assert len(context) == 0
    assert list(context.window(3)) == []


texts = st.text(max_size=20)
calls = st.lists(
    st.builds(
        ToolCall,
        id=st.text(max_size=5),
        name=st.text(min_size=1, max_size=5),
        arguments=st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1)),
    ),
    max_size=2,
).map(tuple)
messages = (
    st.builds(UserMessage, text=texts)
    | st.builds(AssistantMessage, text=texts, tool_calls=calls)
    | st.builds(
        ToolMessage,
        tool_call_id=st.text(max_size=5),
        tool_name=st.text(max_size=5),
        text=texts,
        is_error=st.booleans(),
    )
)


@given(st.lists(messages, max_size=30), st.integers(1, 35), st.integers(1, 35))
def test_window_and_trim_agree_with_the_list_they_replace(
    history: list[ChatMessage], limit: int, trim: int
) -> None:
    context = PackedContext(history)
    assert list(context.window(limit)) == reference_window(history, limit)
    context.trim(trim)
    kept = reference_window(history, trim)
    assert list(context) == kept
    context.append(UserMessage("next"))
    assert list(context.window(limit)) == reference_window([*kept, UserMessage("next")], limit)
