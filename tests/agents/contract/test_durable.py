"""One contract for the agents' durable state (``durable_port.py``), on every backend.

The runtime calls nothing else of its stores, so a backend that passes these can
carry the agents: the files of a home, the memory twin, and PostgreSQL next.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from claybot.agents.durable_port import AgentStoreError
from claybot.agents.history import (
    RawRecord,
    assistant_message_record,
    reset_record,
    user_message_record,
)
from claybot.agents.inbox import InboxItem, ItemKind
from claybot.agents.records import AssistantMessageRecord, UserMessageRecord
from claybot.agents.state import AgentState
from claybot.permissions.model import Permissions
from tests.agents.contract.conftest import Durable, create_agent


def said(n: int, text: str = "", message_id: str | None = None) -> UserMessageRecord:
    return user_message_record(n, text or f"message {n}", message_id or f"m{n}")


def answered(n: int, message_id: str) -> AssistantMessageRecord:
    return assistant_message_record(n, f"answer {n}", message_id, final=True, outgoing_id=f"o{n}")


def texts(records: list[RawRecord]) -> list[str]:
    return [record["text"] for record in records if record["type"] == "user_message"]


# -- agents: the index and creation --------------------------------------------------


async def test_an_empty_store_has_no_agents(durable: Durable) -> None:
    assert await durable.store.load_index() == []
    assert durable.store.unroutable == []


async def test_a_created_agent_is_in_the_index_of_the_next_start(durable: Durable) -> None:
    first = await create_agent(durable.store, "a1", at=1000)
    second = await create_agent(durable.store, "a2", at=2000)
    restarted = await durable.restart()
    _, entries = await restarted.boot()
    assert sorted(entries, key=lambda entry: entry.agent_id) == [first, second]


async def test_a_created_agent_starts_with_its_state_and_start_record(durable: Durable) -> None:
    entry = await create_agent(durable.store, "a1", at=1000)
    restarted = await durable.restart()
    await restarted.boot()
    state = await restarted.store.read_state("a1")
    assert state is not None and (state.createdAt, state.updatedAt) == (1000, 1000)
    [start] = await restarted.store.read_written_history("a1")
    assert start["type"] == "start" and start["at"] == 1000
    assert start["descriptor"] == entry.descriptor.model_dump()


# -- state ----------------------------------------------------------------------------


async def test_a_written_state_is_read_back_after_a_restart(durable: Durable) -> None:
    await create_agent(durable.store, "a1")
    granted = Permissions(readDirs=["/data"], network=True)
    state = AgentState(createdAt=1000, updatedAt=5000, permissions=granted, routing={"k": "v"})
    await durable.store.write_state("a1", state)
    assert await durable.store.read_state("a1") == state
    restarted = await durable.restart()
    await restarted.boot()
    assert await restarted.store.read_state("a1") == state


async def test_several_states_are_written_at_once(durable: Durable) -> None:
    for agent_id in ("a1", "a2", "a3"):
        await create_agent(durable.store, agent_id)
    changed = {
        agent_id: AgentState(createdAt=1000, updatedAt=at).model_dump(mode="json")
        for agent_id, at in (("a1", 2000), ("a2", 3000))
    }
    await durable.store.write_states(changed)
    await durable.store.write_states({})  # nothing to write is no error
    restarted = await durable.restart()
    await restarted.boot()
    states = await restarted.store.read_states(["a1", "a2", "a3", "nobody"])
    assert {agent_id: s.updatedAt if s else None for agent_id, s in states.items()} == {
        "a1": 2000,
        "a2": 3000,
        "a3": 1000,
        "nobody": None,
    }


async def test_an_agent_without_state_reads_as_none(durable: Durable) -> None:
    assert await durable.store.read_state("nobody") is None


async def test_a_state_set_aside_is_gone_from_the_agent(durable: Durable) -> None:
    await create_agent(durable.store, "a1")
    where = await durable.store.set_aside_state("a1")
    assert where  # somewhere its owner can look
    assert await durable.store.read_state("a1") is None
    restarted = await durable.restart()
    await restarted.boot()
    assert await restarted.store.read_state("a1") is None
    assert (await restarted.store.read_agent(
        "a1", repair=True, context_records=10, message_ids=10
    )).state is None  # fmt: skip


def test_a_damaged_state_names_where_it_is() -> None:
    error = AgentStoreError("agents/a1/state.json", "createdAt: field required")
    assert error.where == "agents/a1/state.json"
    assert str(error) == "agents/a1/state.json: createdAt: field required"


# -- history ----------------------------------------------------------------------------


async def test_history_reads_include_queued_records_in_order(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    store.append_history_nowait("a1", said(1))
    await store.append_history("a1", said(2))
    store.append_history_nowait("a1", said(3))
    assert texts(await store.read_written_history("a1")) == ["message 1", "message 2", "message 3"]


async def test_an_awaited_append_keeps_everything_queued_before_it(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    await create_agent(store, "a2")
    store.append_history_nowait("a1", said(1))
    await store.append_history("a2", said(2))  # another agent's: one sync covers both
    restarted = await durable.restart()
    await restarted.boot()
    assert texts(await restarted.store.read_written_history("a1")) == ["message 1"]
    assert texts(await restarted.store.read_written_history("a2")) == ["message 2"]


async def test_after_a_flush_nothing_waits_to_be_written(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    store.append_history_nowait("a1", said(1))
    await store.flush()
    assert not await store.has_backlog()
    restarted = await durable.restart()
    await restarted.boot()
    assert texts(await restarted.store.read_written_history("a1")) == ["message 1"]


async def test_loading_reads_back_to_the_last_marker(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    for record in [said(1), answered(2, "m1"), reset_record(3, "r1"), said(4), answered(5, "m4")]:
        store.append_history_nowait("a1", record)
    await store.flush()
    loaded = await store.read_agent("a1", repair=True, context_records=100, message_ids=100)
    assert loaded.state is not None and loaded.damaged is None
    assert [type(r).__name__ for r in loaded.history.records] == [
        "ResetRecord",
        "UserMessageRecord",
        "AssistantMessageRecord",
    ]
    assert loaded.history.message_ids == ["m1", "r1", "m4"]  # resets are remembered too


async def test_loading_reads_only_as_far_back_as_asked(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    for n in range(1, 7):
        store.append_history_nowait("a1", said(n))
    await store.flush()
    loaded = await store.read_agent("a1", repair=False, context_records=2, message_ids=3)
    said_then = [r.text for r in loaded.history.records if isinstance(r, UserMessageRecord)]
    assert said_then == ["message 5", "message 6"]
    assert loaded.history.message_ids == ["m4", "m5", "m6"]


async def test_a_turns_records_are_read_by_its_message(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    for record in [said(1), answered(2, "m1"), said(3), answered(4, "m3")]:
        store.append_history_nowait("a1", record)
    turn = await store.read_written_turn("a1", "m1")
    assert turn == [said(1), answered(2, "m1")]
    assert await store.read_written_turn("a1", "m9") == []


async def test_history_pages_are_numbered_from_zero(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")  # record 0: its start
    for n in range(1, 10):
        store.append_history_nowait("a1", said(n))
    newest, total = await store.read_history_page("a1", after=None, before=None, limit=3)
    assert total == 10
    assert [r["seq"] for r in newest] == [7, 8, 9]
    assert texts(newest) == ["message 7", "message 8", "message 9"]
    older, _ = await store.read_history_page("a1", after=None, before=7, limit=3)
    assert [r["seq"] for r in older] == [4, 5, 6]
    later, _ = await store.read_history_page("a1", after=7, before=None, limit=5)
    assert [r["seq"] for r in later] == [8, 9]
    first, _ = await store.read_history_page("a1", after=None, before=2, limit=5)
    assert [r["seq"] for r in first] == [0, 1] and first[0]["type"] == "start"
    assert await store.read_history_page("a1", after=9, before=None, limit=5) == ([], 10)


async def test_history_between_two_times(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1", at=0)
    for at in (10, 20, 30, 40, 50):
        store.append_history_nowait("a1", said(at))
    window = await store.read_history_between("a1", from_at=20, to_at=40, limit=10)
    assert [(r["seq"], r["at"]) for r in window] == [(2, 20), (3, 30), (4, 40)]
    last = await store.read_history_between("a1", from_at=20, to_at=40, limit=2)
    assert [r["at"] for r in last] == [30, 40]
    assert [r["at"] for r in await store.read_history_between(
        "a1", from_at=None, to_at=15, limit=10
    )] == [0, 10]  # fmt: skip
    assert [r["at"] for r in await store.read_history_between(
        "a1", from_at=45, to_at=None, limit=10
    )] == [50]  # fmt: skip
    assert await store.read_history_between("a1", from_at=60, to_at=None, limit=10) == []


async def test_a_whole_history_comes_in_numbered_chunks(durable: Durable) -> None:
    store = durable.store
    await create_agent(store, "a1")
    for n in range(1, 8):
        store.append_history_nowait("a1", said(n))
    total, chunks = await store.read_whole_history("a1", chunk=3)
    store.append_history_nowait("a1", said(99))  # after the count: not part of it
    got = [[r["seq"] for r in chunk] async for chunk in chunks]
    assert total == 8
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7]]


async def test_a_history_written_to_has_a_time(durable: Durable) -> None:
    store = durable.store
    assert store.history_updated_ms("nobody") == 0
    await create_agent(store, "a1")
    await store.append_history("a1", said(1))
    assert store.history_updated_ms("a1") > 0
    store.release("a1")  # left memory: reads and writes still work
    await store.append_history("a1", said(2))
    assert texts(await store.read_written_history("a1")) == ["message 1", "message 2"]


async def test_a_record_that_is_no_json_is_refused(durable: Durable) -> None:
    await create_agent(durable.store, "a1")
    with pytest.raises(ValueError):
        durable.store.append_history_nowait("a1", {"type": "note", "at": 1, "text": object()})
    records = await durable.store.read_written_history("a1")
    assert [r["type"] for r in records] == ["start"]  # nothing half-written


# -- the inbox and its outbox -------------------------------------------------------------


def item(
    item_id: str,
    agent_id: str = "a1",
    kind: ItemKind = "message",
    text: str = "",
    context: dict[str, Any] | None = None,
) -> InboxItem:
    return InboxItem(kind, item_id, agent_id, 100, text, context or {})


async def test_accepted_items_come_back_in_order_until_done(durable: Durable) -> None:
    inbox = durable.inbox
    first = item("i1", text="hello", context={"connector": "local", "files": [{"id": "f"}]})
    second = item("i2", agent_id="a2", kind="reset", context={"message": "fresh"})
    third = item("i3", kind="revoke", context={"permission": "@network"})
    for accepted in (first, second, third):
        inbox.accept(accepted)
    await inbox.accept(item("i4"))
    assert inbox.pending_count == 4
    assert inbox.pending_item("a1", "i1") is first
    inbox.mark_done(item("i4"))
    await inbox.accept(item("i5"))
    restarted = await durable.restart()
    items, _ = await restarted.boot()
    assert [i.to_record() for i in items] == [
        first.to_record(),
        second.to_record(),
        third.to_record(),
        item("i5").to_record(),
    ]
    assert restarted.inbox.pending_count == 4
    assert restarted.inbox.pending_item("a1", "i4") is None
    assert restarted.inbox.pending_item("a2", "i2") is not None


async def test_a_done_mark_is_durable_with_the_next_history_write(durable: Durable) -> None:
    await create_agent(durable.store, "a1")
    accepted = item("i1")
    await durable.inbox.accept(accepted)
    durable.inbox.mark_done(accepted)
    await durable.store.append_history("a1", said(1))  # one sync for both stores
    restarted = await durable.restart()
    items, _ = await restarted.boot()
    assert items == []


async def test_a_forgotten_item_is_not_pending(durable: Durable) -> None:
    failed = item("i1")
    durable.inbox.accept(failed)
    durable.inbox.forget(failed)
    assert durable.inbox.pending_item("a1", "i1") is None
    assert durable.inbox.pending_count == 0


async def test_an_item_accepted_twice_comes_back_once(durable: Durable) -> None:
    durable.inbox.accept(item("i1"))
    await durable.inbox.accept(item("i1"))
    restarted = await durable.restart()
    items, _ = await restarted.boot()
    assert [i.id for i in items] == ["i1"]


async def test_the_outbox_remembers_each_delivery_of_an_unfinished_item(durable: Durable) -> None:
    inbox = durable.inbox
    await inbox.accept(item("i1"))
    await inbox.accept(item("i2"))
    assert not inbox.already_sent(("a1", "i1"), "i1#0")
    inbox.mark_sent(("a1", "i1"), "i1#0")
    inbox.mark_sent(("a1", "i2"), "i2#0")
    assert inbox.already_sent(("a1", "i1"), "i1#0")
    assert not inbox.already_sent(("a1", "i1"), "i1#1")
    assert not inbox.already_sent(("a2", "i1"), "i1#0")
    inbox.mark_done(item("i2"))
    await inbox.accept(item("i3"))  # makes the marks durable
    restarted = await durable.restart()
    await restarted.boot()
    assert restarted.inbox.already_sent(("a1", "i1"), "i1#0")
    assert not restarted.inbox.already_sent(("a1", "i2"), "i2#0")  # done: its marks went


async def test_a_checkpoint_keeps_only_what_is_unfinished(durable: Durable) -> None:
    inbox = durable.inbox
    for n in range(5):
        await inbox.accept(item(f"i{n}"))
    inbox.mark_sent(("a1", "i1"), "i1#0")
    for n in (0, 2, 4):
        inbox.mark_done(item(f"i{n}"))
    assert inbox.appended_since_checkpoint > 0
    await inbox.checkpoint()
    assert inbox.appended_since_checkpoint == 0
    assert inbox.pending_count == 2
    restarted = await durable.restart()
    items, _ = await restarted.boot()
    assert [i.id for i in items] == ["i1", "i3"]
    assert restarted.inbox.already_sent(("a1", "i1"), "i1#0")


async def test_acceptance_is_one_sync_for_many_items(durable: Durable) -> None:
    futures = [durable.inbox.accept(item(f"i{n}")) for n in range(50)]
    await asyncio.gather(*futures)
    restarted = await durable.restart()
    items, _ = await restarted.boot()
    assert [i.id for i in items] == [f"i{n}" for n in range(50)]
