"""Every implementation of the agents' durable state, opened the same way.

A backend is an ``AgentStore`` and an ``InboxStore`` that share one durability (as
the files share the group-commit writer), and a way to get them back as the next
start of the engine would. Each backend is a name in ``BACKENDS`` and a branch in
``opened``; every test of ``tests/agents/contract`` runs on each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from sqlalchemy import delete

from claybot.agents.descriptors import UserDescriptor, descriptor_to_dict
from claybot.agents.durable_port import AgentStore, InboxStore, IndexEntry
from claybot.agents.history import start_record
from claybot.agents.inbox import InboxItem
from claybot.agents.inbox_log import InboxLog
from claybot.agents.memory_store import MemoryAgentStore, MemoryDisk, MemoryInbox
from claybot.agents.postgres_store import PostgresAgentStore, PostgresInbox, SqlWriter
from claybot.agents.state import AgentState
from claybot.agents.store import FileAgentStore
from claybot.db.database import create_database_engine, migrate
from claybot.db.tables import agent_history, agent_inbox, agent_index
from claybot.durable.group_commit import GroupCommitWriter

BACKENDS = ["files", "memory", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass
class Durable:
    """One backend's two stores, and the next start's (``restart``): on files and in
    PostgreSQL, the writer is closed (what it holds is written) and a new one opened;
    in memory, the disk crashes (what was not made durable is gone), so a test
    asserts only what every backend promises."""

    store: AgentStore
    inbox: InboxStore
    restart: Callable[[], Awaitable[Durable]]

    async def boot(self) -> tuple[list[InboxItem], list[IndexEntry]]:
        """What the engine's boot reads, in its order."""
        items = await self.inbox.recover()
        return items, await self.store.load_index()


@asynccontextmanager
async def opened(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Durable]:
    """The backend's stores, booted on an empty home (or database)."""
    if backend == "postgres":
        engine = create_database_engine(request.getfixturevalue("postgres_url"))
        await migrate(engine)
        async with engine.begin() as connection:  # the database lives all session
            for table in (agent_inbox, agent_history, agent_index):
                await connection.execute(delete(table))
        writers: list[SqlWriter] = []

        async def restart_postgres() -> Durable:
            if writers:
                await writers[-1].flush()
            writer = SqlWriter(engine)
            writers.append(writer)
            return Durable(PostgresAgentStore(writer), PostgresInbox(writer), restart_postgres)

        try:
            first = await restart_postgres()
            await first.boot()
            yield first
            await writers[-1].flush()
        finally:
            await engine.dispose()
        return
    if backend == "memory":
        disks = [MemoryDisk()]

        async def restart_memory() -> Durable:
            disks.append(MemoryDisk(disks[-1].crash()))
            return Durable(MemoryAgentStore(disks[-1]), MemoryInbox(disks[-1]), restart_memory)

        first = Durable(MemoryAgentStore(disks[0]), MemoryInbox(disks[0]), restart_memory)
        await first.boot()
        yield first
        return
    assert backend == "files", backend
    home = request.getfixturevalue("tmp_path") / "home"
    agents = home / "agents"
    file_writers: list[GroupCommitWriter] = []

    async def start_files() -> Durable:
        if file_writers:
            await file_writers[-1].close()
        writer = GroupCommitWriter(journal=agents / "inbox.wal", root=home)
        await writer.start()
        file_writers.append(writer)
        store = FileAgentStore(agents, writer)
        return Durable(store, InboxLog(agents / "inbox.wal", writer, root=home), start_files)

    first = await start_files()
    await first.boot()
    try:
        yield first
    finally:
        await file_writers[-1].close()


@pytest.fixture(params=BACKENDS)
async def durable(request: pytest.FixtureRequest) -> AsyncIterator[Durable]:
    async with opened(request.param, request) as stores:
        yield stores


def user_entry(agent_id: str, at: int = 1000) -> IndexEntry:
    descriptor = UserDescriptor(connector="local", userId=f"u-{agent_id}", channelId="c")
    return IndexEntry(agent_id, descriptor, at)


async def create_agent(store: AgentStore, agent_id: str, at: int = 1000) -> IndexEntry:
    """A user agent as admission makes one: its entry, a fresh state, a start record."""
    entry = user_entry(agent_id, at)
    start = start_record(at, descriptor_to_dict(entry.descriptor))
    await store.create(entry, AgentState(createdAt=at, updatedAt=at), start)
    return entry
