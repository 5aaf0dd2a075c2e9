"""The memory twin's crash: what it keeps is what the files would have made durable."""

from __future__ import annotations

from claybot.agents.history import user_message_record
from claybot.agents.inbox import InboxItem
from claybot.agents.memory_store import MemoryAgentStore, MemoryDisk, MemoryInbox
from tests.agents.contract.conftest import create_agent


async def test_a_crash_loses_what_no_awaited_write_covered() -> None:
    disk = MemoryDisk()
    store, inbox = MemoryAgentStore(disk), MemoryInbox(disk)
    await create_agent(store, "a1")
    accepted = InboxItem("message", "i1", "a1", 1, "hi")
    await inbox.accept(accepted)
    await store.append_history("a1", user_message_record(1, "kept", "i1"))
    store.append_history_nowait("a1", user_message_record(2, "lost", "i2"))
    inbox.mark_done(accepted)  # queued, never synced
    after = MemoryDisk(disk.crash())
    restarted_inbox, restarted = MemoryInbox(after), MemoryAgentStore(after)
    assert [item.id for item in await restarted_inbox.recover()] == ["i1"]
    records = await restarted.read_written_history("a1")
    assert [r.get("text") for r in records] == [None, "kept"]


async def test_queued_writes_are_read_back_before_they_are_durable() -> None:
    disk = MemoryDisk()
    store = MemoryAgentStore(disk)
    await create_agent(store, "a1")
    store.append_history_nowait("a1", user_message_record(1, "queued", "m1"))
    assert [r.get("text") for r in await store.read_written_history("a1")] == [None, "queued"]
    assert disk.image.histories["a1"][1:] == []  # not durable yet
    await store.flush()
    assert len(disk.image.histories["a1"]) == 2
