"""Loading an agent reads the end of its history only, and gets what a whole read gave:
the same context window and the same remembered message ids."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from claybot.agents.agent_tools import AgentTools, ReadSessionHistory
from claybot.agents.descriptors import agent_kind
from claybot.agents.history import (
    CONTEXT_RECORDS,
    REMEMBERED_RECORDS,
    assistant_message_record,
    build_context,
    history_tail,
    note_record,
    of_turn,
    reset_record,
    since_last_marker,
    start_record,
    tool_result_record,
    turn_records,
    user_message_record,
)
from claybot.agents.records import (
    AssistantMessageRecord,
    HistoryRecord,
    decode_record,
    encode_record_line,
)
from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.durable.jsonl import read_lines_backward
from claybot.engine.engine import Engine, EngineOptions
from claybot.providers.base import ToolCall
from claybot.tools.base import ToolContext
from tests.conftest import ECHO_SETTINGS, write_settings


def turn_lines(n: int, kind: str) -> list[bytes]:
    """One turn's lines in the file; ``kind`` picks what else a history holds."""
    message_id = f"m{n}"
    user = encode_record_line(user_message_record(n, f"question {n}", message_id))
    if kind == "reset":
        return [encode_record_line(reset_record(n, f"r{n}"))]
    if kind == "tool":
        # A tool call whose arguments hold what looks like a marker: not one.
        call = ToolCall(f"c{n}", "note", {"type": "reset", "messageId": "not-an-id"})
        return [
            user,
            encode_record_line(
                assistant_message_record(n, "", message_id, tool_calls=[call], final=False)
            ),
            encode_record_line(tool_result_record(n, message_id, call, "done", is_error=False)),
            encode_record_line(assistant_message_record(n, f"answer {n}", message_id, final=True)),
        ]
    if kind == "damaged":
        return [user, b"not json\n", b"\n"]
    return [
        user,
        encode_record_line(assistant_message_record(n, f"answer {n}", message_id, final=True)),
    ]


def whole_read(lines: list[bytes]) -> list[HistoryRecord]:
    """Every record of the file, read from the start (a damaged line is none)."""
    records = [decode_record(line) for line in b"".join(lines).splitlines()]
    return [record for record in records if record is not None]


def remembered(records: list[HistoryRecord]) -> list[str]:
    return [
        record.messageId
        for record in records
        if isinstance(record, REMEMBERED_RECORDS) and record.messageId
    ]


@settings(max_examples=80, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["plain", "plain", "tool", "reset", "damaged"]), max_size=60),
    window=st.integers(2, 12),
    ids=st.integers(1, 40),
)
def test_the_tail_gives_the_whole_reads_window_and_ids(
    tmp_path_factory: Any, kinds: list[str], window: int, ids: int
) -> None:
    lines = [encode_record_line(start_record(0))]
    for n, kind in enumerate(kinds):
        lines += turn_lines(n, kind)
    path = tmp_path_factory.mktemp("tail") / "history.jsonl"
    path.write_bytes(b"".join(lines))
    records = whole_read(lines)
    tail = history_tail(read_lines_backward(path), context_records=2 * window + 4, message_ids=ids)
    expected = build_context(since_last_marker(records)).window(window)
    got = build_context(since_last_marker(tail.records)).window(window)
    assert list(got) == list(expected)
    assert tail.message_ids == remembered(records)[-ids:]
    # Only the end was taken: the context records the window needs, no more.
    assert sum(isinstance(record, CONTEXT_RECORDS) for record in tail.records) <= 2 * window + 4


def test_the_last_marker_ends_the_context_however_few_records_follow_it(tmp_path: Path) -> None:
    lines = [encode_record_line(start_record(0))]
    for n in range(50):
        lines += turn_lines(n, "plain")
    lines += turn_lines(50, "reset") + turn_lines(51, "plain")
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(lines))
    tail = history_tail(read_lines_backward(path), context_records=400, message_ids=4096)
    assert [type(record).__name__ for record in tail.records] == [
        "ResetRecord",
        "UserMessageRecord",
        "AssistantMessageRecord",
    ]
    assert tail.message_ids == [f"m{n}" for n in range(50)] + ["r50", "m51"]


async def test_an_agent_with_a_long_history_loads_its_window_and_recent_ids(
    paths: HomePaths,
) -> None:
    """Written straight to disk as an agent of an earlier run, then loaded by a message:
    the model gets the last messages of the window, and a retried old message id is
    still known as a duplicate while one beyond the 4,096 remembered is not."""
    write_settings(paths, ECHO_SETTINGS)
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    try:
        first = await engine.agents.submit_inbound(
            InboundMessage("local", "u1", "c1", "hello", "m-first")
        )
        await first.outcome(10)
        agent_id = first.agent_id
        assert await engine.agents.unload_idle(older_than_s=0) == 1
    finally:
        await engine.stop(drain_timeout_s=2)
    history = paths.agents / agent_id / "history.jsonl"
    with history.open("ab") as file:
        for n in range(5000):
            file.write(b"".join(turn_lines(n, "plain")))
        os.fsync(file.fileno())
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    try:
        retried = await engine.agents.submit_inbound(
            InboundMessage("local", "u1", "c1", "question 4990", "m4990")
        )
        assert retried.duplicate
        forgotten = await engine.agents.submit_inbound(
            InboundMessage("local", "u1", "c1", "question 10", "m10")
        )
        assert not forgotten.duplicate  # 4,990 messages ago: beyond the window of ids
        await forgotten.outcome(10)
        request = engine.router.providers[0].requests[-1]
        records = whole_read(history.read_bytes().splitlines(True))
        assert isinstance(records[-1], AssistantMessageRecord)  # the reply, after the call
        context = build_context(since_last_marker(records[:-1]))
        expected = list(context.window(engine.settings.agents.max_context_messages))
        assert list(request.messages) == expected
    finally:
        await engine.stop(drain_timeout_s=2)


async def test_session_history_by_time_finds_an_old_window(engine: Engine) -> None:
    """read_session_history with fromAt/toAt seeks to the window, however far back it is
    (it used to look only at the newest 2,000 records)."""
    turn = await engine.agents.submit_inbound(InboundMessage("local", "u1", "c1", "hi", "m1"))
    await turn.outcome(10)
    agent_id = turn.agent_id
    assert await engine.agents.unload_idle(older_than_s=0) == 1
    with (engine.paths.agents / agent_id / "history.jsonl").open("ab") as file:
        for n in range(5000):
            file.write(encode_record_line(note_record(10**13 + n, f"note {n}")))
    tools = AgentTools(engine.agents)
    context = ToolContext(agent_id, agent_kind(engine.agents.descriptor_of(agent_id)), None)
    window = ReadSessionHistory(agentId=agent_id, fromAt=10**13 + 100, toAt=10**13 + 104)
    result = await tools.read_session_history(window, context)
    assert not result.is_error
    texts = [json.loads(line)["text"] for line in result.text.splitlines()]
    assert texts == [f"note {n}" for n in range(100, 105)]
    newest = ReadSessionHistory(agentId=agent_id, fromAt=10**13 + 100, limit=3)
    result = await tools.read_session_history(newest, context)
    assert [json.loads(line)["text"] for line in result.text.splitlines()] == [
        "note 4997",
        "note 4998",
        "note 4999",
    ]


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["plain", "tool", "reset", "damaged"]), min_size=1, max_size=30),
    data=st.data(),
)
def test_a_turns_records_read_from_the_end_are_those_a_whole_read_finds(
    tmp_path_factory: Any, kinds: list[str], data: st.DataObject
) -> None:
    lines = [encode_record_line(start_record(0))]
    for n, kind in enumerate(kinds):
        lines += turn_lines(n, kind)
    path = tmp_path_factory.mktemp("turn") / "history.jsonl"
    path.write_bytes(b"".join(lines))
    n = data.draw(st.integers(0, len(kinds)))  # len(kinds): an id history does not know
    message_id = f"r{n}" if n < len(kinds) and kinds[n] == "reset" else f"m{n}"
    expected = of_turn(whole_read(lines), message_id)
    assert turn_records(read_lines_backward(path), message_id) == expected
