"""One contract for every transcript: an agent's, on each backend of the agents' durable
state (``conftest.BACKENDS``), and the standalone in-memory twin.

The same tests, and the very same turn loop, run over all of them, so a store that
passes them (a job's rows in the database, next) can carry a turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from claybot.agents.history import (
    assistant_message_record,
    build_context,
    turn_progress,
    user_message_record,
)
from claybot.agents.inbox import InboxItem
from claybot.agents.records import (
    AssistantMessageRecord,
    HistoryRecord,
    StartRecord,
    ToolOutput,
    ToolResultRecord,
    UserMessageRecord,
)
from claybot.agents.transcript import AgentTranscript, MemoryTranscript, Transcript
from claybot.agents.turn_loop import INTERRUPTED_TOOL, LoopLimits, TurnLoop, TurnWork
from claybot.config.settings import ProviderSettings
from claybot.files.reference import FileReference
from claybot.kernel.events import EventBus
from claybot.permissions.model import Permissions
from claybot.providers.base import TokenUsage, ToolCall
from claybot.providers.scripted import ScriptedProvider
from claybot.tools.base import (
    AgentKind,
    Delivery,
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
)
from tests.agents.contract.conftest import BACKENDS, Durable, create_agent, opened


@dataclass
class Store:
    """A transcript, and how to get it back as a restarted engine would see it."""

    transcript: Transcript
    reopen: Callable[[], Awaitable[Transcript]]


async def read(transcript: Transcript) -> list[HistoryRecord]:
    """The conversation's records: an agent's history begins with its start marker."""
    records = await transcript.read()
    return records[1:] if records and isinstance(records[0], StartRecord) else records


def kinds(records: list[HistoryRecord]) -> list[str]:
    return [str(record.__struct_config__.tag) for record in records]


def texts(records: list[HistoryRecord]) -> list[str]:
    return [record.text for record in records if isinstance(record, UserMessageRecord)]


@pytest.fixture(params=[*BACKENDS, "transcript-twin"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "transcript-twin":
        memories = [MemoryTranscript()]

        async def reopen_memory() -> Transcript:
            last = memories[-1]
            last.crash()
            memories.append(MemoryTranscript(last.durable, delivered=last.durable_deliveries))
            return memories[-1]

        yield Store(memories[0], reopen_memory)
        return
    async with AsyncExitStack() as stack:
        durable = await stack.enter_async_context(opened(request.param, request))
        await create_agent(durable.store, "a1")
        # The turn of m1 runs for an item pending in the inbox, as in the engine: the
        # outbox keeps the delivery marks of unfinished items only.
        await durable.inbox.accept(InboxItem("message", "m1", "a1", 1, "remember milk"))
        last = [durable]

        async def reopen_durable() -> Transcript:
            restarted: Durable = await last[-1].restart()
            await restarted.boot()  # the sent marks come back, as at boot
            last.append(restarted)
            return AgentTranscript(restarted.store, restarted.inbox, "a1")

        yield Store(AgentTranscript(durable.store, durable.inbox, "a1"), reopen_durable)


def said(text: str, n: int) -> UserMessageRecord:
    return user_message_record(n, text, f"m{n}")


async def test_records_read_back_in_order_queued_ones_included(store: Store) -> None:
    transcript = store.transcript
    transcript.append(said("one", 1))
    await transcript.append_durably(said("two", 2))
    transcript.append(said("three", 3))
    assert texts(await read(transcript)) == ["one", "two", "three"]


async def test_a_durable_append_keeps_everything_before_it(store: Store) -> None:
    store.transcript.append(said("one", 1))
    await store.transcript.append_durably(said("two", 2))
    reopened = await store.reopen()
    assert texts(await read(reopened))[:2] == ["one", "two"]


async def test_deliveries_are_remembered_per_reply(store: Store) -> None:
    transcript = store.transcript
    assert not transcript.delivered("m1", "m1#0")
    transcript.mark_delivered("m1", "m1#0")
    assert transcript.delivered("m1", "m1#0")
    assert not transcript.delivered("m1", "m1#1") and not transcript.delivered("m2", "m1#0")


# -- the turn loop over each ---------------------------------------------------------


class Noted(BaseModel):
    note: str


@dataclass
class Owner:
    """A ``TurnOwner`` that keeps what it is given."""

    id: str = "a1"
    kind: AgentKind = "user"
    permissions: Permissions = field(default_factory=Permissions)
    replies: list[tuple[str, str, bool, bool]] = field(default_factory=list)
    usage: list[TokenUsage] = field(default_factory=list)
    files: list[tuple[str, tuple[FileReference, ...], bool]] = field(default_factory=list)
    crash_on_files: bool = False  # the engine dies as a message with files goes out

    async def reply(
        self,
        item_id: str,
        outgoing_id: str,
        text: str,
        *,
        final: bool,
        delivered_before: bool,
        files: tuple[FileReference, ...] = (),
    ) -> bool:
        if files and self.crash_on_files and not delivered_before:
            raise Crashed
        self.replies.append((outgoing_id, text, final, delivered_before))
        if files:
            self.files.append((outgoing_id, files, delivered_before))
        return True

    def count_usage(self, usage: TokenUsage, provider: str, model: str) -> None:
        self.usage.append(usage)


class Crashed(Exception):
    """The engine died here (what is not durable yet is lost with it)."""


REPORT = FileReference("ab" * 32, "report.pdf", "application/pdf", 1234)


def loop_with(*responses: Any) -> tuple[TurnLoop, list[str]]:
    """A loop whose model says ``responses`` in turn, with a ``note`` tool, and a
    ``send`` tool that sends REPORT (as send_file does, with the note as caption)."""
    notes: list[str] = []

    async def note(arguments: Noted, context: ToolContext) -> str:
        notes.append(arguments.note)
        return f"noted {arguments.note}"

    async def send(arguments: Noted, context: ToolContext) -> ToolResult:
        notes.append(f"sent {arguments.note}")
        return ToolResult("Sent report.pdf.", delivers=Delivery(arguments.note, (REPORT,)))

    provider = ScriptedProvider(
        ProviderSettings(id="scripted", model="script", options={"responses": list(responses)})
    )
    tools = ToolRegistry(
        [
            ToolDefinition("note", "Keep a note.", Noted, note),
            ToolDefinition("send", "Send the report.", Noted, send),
        ]
    )
    loop = TurnLoop(
        providers=provider, tools=tools, events=EventBus(), now_ms=lambda: 7, limits=LoopLimits()
    )
    return loop, notes


async def test_a_turn_with_a_tool_call(store: Store) -> None:
    loop, notes = loop_with(
        {"text": "on it", "toolCalls": [{"name": "note", "arguments": {"note": "milk"}}]}, "done"
    )
    owner = Owner()
    work = TurnWork("m1", "remember milk", None, store.transcript)
    outcome = await loop.run(owner, work)
    assert (outcome.text, outcome.failed) == ("done", False)
    assert notes == ["milk"]
    assert owner.replies == [("m1#0", "on it", False, False), ("m1#1", "done", True, False)]
    records = await read(store.transcript)
    assert kinds(records) == [
        "user_message",
        "assistant_message",
        "tool_result",
        "assistant_message",
    ]
    assert turn_progress(records, "m1").done
    assert [m.role for m in work.context] == ["user", "assistant", "tool", "assistant"]
    # What the loop kept in memory is exactly what a restarted engine rebuilds from history.
    assert build_context(records) == work.context
    assert store.transcript.delivered("m1", "m1#0")  # the final reply needs no mark


async def test_a_turn_resumes_where_the_crash_left_it(store: Store) -> None:
    # Before the crash: the question, and a reply that called a tool and was sent.
    call = ToolCall("c1", "note", {"note": "milk"})
    store.transcript.append(said("remember milk", 1))
    await store.transcript.append_durably(
        assistant_message_record(
            7, "on it", "m1", tool_calls=(call,), final=False, outgoing_id="m1#0"
        )
    )
    store.transcript.mark_delivered("m1", "m1#0")
    await store.transcript.append_durably(said("unrelated", 2))  # makes the mark durable too
    transcript = await store.reopen()
    records = await read(transcript)
    loop, notes = loop_with("done after all")
    owner = Owner()
    work = TurnWork(
        "m1",
        "remember milk",
        None,
        transcript,
        build_context(records),
        turn_progress(records, "m1"),
    )
    outcome = await loop.run(owner, work)
    assert outcome.text == "done after all"
    assert notes == []  # the interrupted call is reported, never run again
    assert owner.replies[0] == ("m1#0", "on it", False, True)  # re-noted, not re-sent
    assert owner.replies[1] == ("m1#1", "done after all", True, False)
    results = [r for r in await read(transcript) if isinstance(r, ToolResultRecord)]
    assert results[0].output == ToolOutput(INTERRUPTED_TOOL, True)


SEND = {"text": "", "toolCalls": [{"name": "send", "arguments": {"note": "the report"}}]}


async def test_a_file_a_tool_sends_is_recorded_and_goes_out_as_a_reply(store: Store) -> None:
    loop, notes = loop_with(SEND, "here it is")
    owner = Owner()
    work = TurnWork("m1", "send me the report", None, store.transcript)
    outcome = await loop.run(owner, work)
    assert outcome.text == "here it is" and notes == ["sent the report"]
    assert owner.replies == [
        ("m1#0", "the report", False, False),
        ("m1#1", "here it is", True, False),
    ]
    assert owner.files == [("m1#0", (REPORT,), False)]
    records = await read(store.transcript)
    sent, calling = records[2], records[1]
    assert isinstance(sent, AssistantMessageRecord) and isinstance(calling, AssistantMessageRecord)
    assert (sent.outgoingId, sent.toolCallId) == ("m1#0", calling.toolCalls[0].id)
    assert sent.files == [REPORT.to_dict()] and sent.text == "the report"
    # The model knows of it from the call's result, not from a message of its own.
    assert [m.role for m in work.context] == ["user", "assistant", "tool", "assistant"]
    assert build_context(records) == work.context


async def test_a_sent_file_goes_out_once_across_a_crash(store: Store) -> None:
    loop, notes = loop_with(SEND)
    with pytest.raises(Crashed):  # recorded, then the engine died before it went out
        await loop.run(Owner(crash_on_files=True), TurnWork("m1", "send", None, store.transcript))
    transcript = await store.reopen()
    records = await read(transcript)
    again, notes_after = loop_with("here it is")
    owner = Owner()
    work = TurnWork(
        "m1", "send", None, transcript, build_context(records), turn_progress(records, "m1")
    )
    assert (await again.run(owner, work)).text == "here it is"
    assert notes == ["sent the report"] and notes_after == []  # the tool did not run again
    assert owner.files == [("m1#0", (REPORT,), False)]  # sent now, as it was not before
    # Once more after it was marked sent: noted, never sent a second time.
    transcript = await store.reopen()
    records = await read(transcript)
    owner = Owner()
    work = TurnWork(
        "m1", "send", None, transcript, build_context(records), turn_progress(records, "m1")
    )
    await loop_with()[0].run(owner, work)
    assert owner.files == [("m1#0", (REPORT,), True)]
    assert [r.toolName for r in records if isinstance(r, ToolResultRecord)] == ["send"]
