"""Chat's history catch-up, against a fake history: paging, de-duplication, final records."""

from __future__ import annotations

from typing import Any, cast

import pytest

from claybot.cli.chat_conversation import Conversation
from claybot.config.home import HomePaths
from claybot.wire.events import EventFrame
from claybot.wire.history import AgentHistory


class FakeHistory:
    """The engine's history paging: newest page without ``after``, oldest first with it."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []

    def add(self, **record: Any) -> None:
        self.records.append(record)

    def history(self, agent_id: str, *, after: int | None = None, limit: int) -> AgentHistory:
        assert agent_id == "agent-1"
        self.calls.append({"after": after, "limit": limit})
        numbered = [{"seq": seq, **record} for seq, record in enumerate(self.records)]
        page = numbered[-limit:] if after is None else numbered[after + 1 : after + 1 + limit]
        return AgentHistory.model_validate(
            {"ok": True, "agentId": agent_id, "total": len(numbered), "records": page}
        )


def frame(event_id: int, kind: str, payload: dict[str, Any]) -> EventFrame:
    return EventFrame(id=event_id, type=kind, payload=payload, timestamp="2025-01-01T00:00:00Z")


def reply(message_id: str, text: str, outgoing_id: str | None, final: bool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "assistant_message",
        "messageId": message_id,
        "text": text,
        "final": final,
    }
    if outgoing_id:
        record["outgoingId"] = outgoing_id
    return record


@pytest.fixture
def conversation(paths: HomePaths) -> Conversation:
    conversation = Conversation(paths, "ann", "cli", history_page=2)
    conversation.agent_id = "agent-1"
    return conversation


def agent_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("agent>")]


def test_catch_up_prints_own_replies_once_and_pages_after_the_last_record(
    conversation: Conversation, capsys: pytest.CaptureFixture[str]
) -> None:
    history = FakeHistory()
    conversation.remember("m1")
    history.add(type="user_message", messageId="m1", text="one")
    history.add(**reply("m1", "thinking about it", "o1", final=False))
    history.add(**reply("someone-else", "not for this session", "o9", final=True))
    history.add(**reply("m1", "done: one", "o2", final=True))

    conversation.catch_up(cast(Any, history))
    assert agent_lines(capsys.readouterr().out) == ["agent> done: one"]  # the newest page only
    assert conversation.is_answered("m1") and history.calls == [{"after": None, "limit": 2}]

    conversation.remember("m2")
    for index in range(3):
        history.add(**reply("m2", f"step {index}", f"p{index}", final=index == 2))
    history.calls.clear()
    conversation.catch_up(cast(Any, history))
    conversation.catch_up(cast(Any, history))  # nothing new: nothing printed twice
    assert agent_lines(capsys.readouterr().out) == [
        "agent> step 0",
        "agent> step 1",
        "agent> step 2",
    ]
    assert [call["after"] for call in history.calls] == [3, 5, 6]
    assert conversation.is_answered("m2")


def test_a_turn_without_text_ends_the_wait_silently(
    conversation: Conversation, capsys: pytest.CaptureFixture[str]
) -> None:
    history = FakeHistory()
    conversation.remember("m1")
    history.add(**reply("m1", "", None, final=False))
    conversation.catch_up(cast(Any, history))
    assert not conversation.is_answered("m1")
    history.add(**reply("m1", "", None, final=True))
    conversation.catch_up(cast(Any, history))
    assert conversation.is_answered("m1") and capsys.readouterr().out == ""


def test_a_reply_already_shown_from_the_stream_is_not_repeated(
    conversation: Conversation, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation.remember("m1")
    outgoing = {
        "id": "o1",
        "agentId": "agent-1",
        "connector": "local",
        "userId": "ann",
        "channelId": "cli",
        "text": "echo: hi",
        "inReplyTo": "m1",
        "final": True,
    }
    conversation.on_event(frame(1, "agent.outgoing", {"message": outgoing}))
    other_user = {**outgoing, "id": "o2", "userId": "bob", "inReplyTo": "b1"}
    conversation.on_event(frame(2, "agent.outgoing", {"message": other_user}))
    history = FakeHistory()
    history.add(**reply("m1", "echo: hi", "o1", final=True))
    conversation.catch_up(cast(Any, history))
    assert agent_lines(capsys.readouterr().out) == ["agent> echo: hi"]
    assert conversation.is_answered("m1")
