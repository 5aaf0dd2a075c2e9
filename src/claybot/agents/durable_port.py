"""The agents' durable state, as a port: exactly what the runtime reads and writes.

Two roles. ``AgentStore``: every agent's descriptor (the index), its state and its
history. ``InboxStore``: the items accepted for agents until they are done, and the
outbox of an unfinished item (which of its replies went out; a reply written but not
marked is delivered at the next start, never generated again). The runtime
(``system.py``, ``residency.py``, ``admission.py``, ``agent.py``, ``transcript.py``)
reaches its state only through these, so what is under them can change:

- ``FileAgentStore`` and ``InboxLog``: seed 001's files in the home (the default);
- ``MemoryAgentStore`` and ``MemoryInbox`` (``memory_store.py``): the twin, whose
  ``crash`` keeps only what was made durable;
- ``PostgresAgentStore`` and ``PostgresInbox`` (``postgres_store.py``): tables in
  the database, for cluster mode.

``tests/agents/contract`` holds every implementation to the same behaviour.

Durability is group commit's: a queued write (``append_history_nowait``,
``mark_sent``, ``mark_done``) is durable once a later write of either store that
returns a future has it resolved; a crash loses only writes no resolved future covers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from claybot.agents.descriptors import AgentDescriptor
from claybot.agents.history import HistoryTail, RawRecord
from claybot.agents.inbox import InboxItem
from claybot.agents.records import HistoryRecord, StartRecord
from claybot.agents.state import AgentState

HISTORY_CHUNK = 1000  # records read at a time for a whole history


@dataclass(frozen=True)
class IndexEntry:
    agent_id: str
    descriptor: AgentDescriptor
    created_at: int


class AgentStoreError(Exception):
    """An agent's stored state that does not validate: ``where`` it is, and why not."""

    def __init__(self, where: str, problems: str) -> None:
        super().__init__(f"{where}: {problems}")
        self.where = where


@dataclass(frozen=True)
class AgentProblem:
    """A file of an agent that could not be used, and what was done about it."""

    agent_id: str
    file: str
    error: str
    action: str

    def to_dict(self) -> dict[str, str]:
        return {"agentId": self.agent_id, "file": self.file, "error": self.error,
                "action": self.action}  # fmt: skip


@dataclass(frozen=True)
class StoredAgent:
    """What loading an agent reads: its state (None if it has none, or if it could not
    be read: then ``damaged`` says why) and the end of its history."""

    state: AgentState | None
    damaged: AgentStoreError | None
    history: HistoryTail


class AgentStore(Protocol):
    """Every agent's descriptor, state and history."""

    @property
    def unroutable(self) -> list[AgentProblem]:
        """Agents found by ``load_index`` whose descriptor could not be read nor rebuilt:
        they cannot be routed to, and are reported rather than dropped without a word."""
        ...

    async def load_index(self) -> list[IndexEntry]:
        """Every agent, at boot (after ``InboxStore.recover``)."""
        ...

    async def create(self, entry: IndexEntry, state: AgentState, start: StartRecord) -> None:
        """Durably create an agent with its state and its history's first record: all of
        it, or (a failure) none of it."""
        ...

    async def read_agent(
        self, agent_id: str, *, repair: bool, context_records: int, message_ids: int
    ) -> StoredAgent:
        """What loading the agent needs (see ``history_tail``); ``repair`` (the first load
        after a start) first cuts off a record a crash tore."""
        ...

    async def read_state(self, agent_id: str) -> AgentState | None:
        """The agent's state; None if it has none; ``AgentStoreError`` if it is damaged."""
        ...

    async def read_states(self, agent_ids: list[str]) -> dict[str, AgentState | None]:
        """Several agents' states at once; a damaged one reads as None."""
        ...

    async def set_aside_state(self, agent_id: str) -> str:
        """Keep a damaged state where its owner can look at it, out of the agent's way;
        returns where it went."""
        ...

    async def write_state(self, agent_id: str, state: AgentState) -> None:
        """Replace the agent's state, durably."""
        ...

    async def write_states(self, states: dict[str, dict[str, Any]]) -> None:
        """Replace several agents' states (already dumped), durably, as one write."""
        ...

    def append_history(self, agent_id: str, record: HistoryRecord) -> asyncio.Future[None]:
        """Queue a record; the future resolves once it (and all queued before) is durable."""
        ...

    def append_history_nowait(self, agent_id: str, record: HistoryRecord) -> None:
        """Queue a record, durable with the next write that is waited for."""
        ...

    async def read_written_history(self, agent_id: str) -> list[RawRecord]:
        """Every record as read, queued ones included; a damaged one is a ``damaged``
        record. Dicts (``RawRecord``): lines as read, unknown fields kept."""
        ...

    async def read_written_turn(self, agent_id: str, message_id: str) -> list[HistoryRecord]:
        """One message's records (see ``turn_records``), queued ones included."""
        ...

    async def read_history_page(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> tuple[list[RawRecord], int]:
        """A page of records numbered from 0 (``seq``) and how many there are: with
        ``after``, the ``limit`` records numbered above it; without, the newest ``limit``
        below ``before`` (or below the end). Dicts (``RawRecord``): lines as read,
        unknown fields kept, for the API page."""
        ...

    async def read_history_between(
        self, agent_id: str, *, from_at: int | None, to_at: int | None, limit: int
    ) -> list[RawRecord]:
        """The last ``limit`` numbered records whose ``at`` is within the bounds (unix
        ms, both included). Dicts (``RawRecord``): lines as read, unknown fields kept."""
        ...

    async def read_whole_history(
        self, agent_id: str, *, chunk: int = HISTORY_CHUNK
    ) -> tuple[int, AsyncIterator[list[RawRecord]]]:
        """How many records the history holds now, and those records, numbered, in
        chunks of ``chunk``; records appended after the count are not part of it.
        Dicts (``RawRecord``): lines as read, unknown fields kept, for the download."""
        ...

    def history_updated_ms(self, agent_id: str) -> int:
        """When the agent's history was last written to (unix ms; 0: never). Not async:
        listings ask it of many agents at rest, once each per start."""
        ...

    def release(self, agent_id: str) -> None:
        """The agent left memory: what the store holds open for it may go."""
        ...

    async def flush(self) -> None:
        """Until every write queued so far was made durable (or failed)."""
        ...

    async def has_backlog(self) -> bool:
        """Once every write queued so far was tried: whether some were refused (a full
        disk) and wait to be written again. An agent's files are read only without."""
        ...


class InboxStore(Protocol):
    """The accepted items of every agent until they are done, and their outbox."""

    async def recover(self) -> list[InboxItem]:
        """At boot, before ``AgentStore.load_index``: the items accepted and not done,
        in acceptance order (also what the store must put right after a crash first)."""
        ...

    def accept(self, item: InboxItem) -> asyncio.Future[None]:
        """Queue an item; the future resolves once it is durable (accepted)."""
        ...

    def forget(self, item: InboxItem) -> None:
        """The item's write failed: it was never accepted."""
        ...

    def pending_item(self, agent_id: str, item_id: str) -> InboxItem | None:
        """The accepted item, if it is not done yet."""
        ...

    @property
    def pending_count(self) -> int:
        """Items accepted and not done."""
        ...

    def mark_done(self, item: InboxItem) -> None:
        """The item was processed (durable with the next write waited for); its outbox
        marks go with it."""
        ...

    def already_sent(self, key: tuple[str, str], outgoing_id: str) -> bool:
        """Whether an outgoing message of the unfinished item ``key`` (agent id, item id)
        was delivered."""
        ...

    def mark_sent(self, key: tuple[str, str], outgoing_id: str) -> None:
        """An outgoing message of the item went out (durable with the next write waited
        for: a repeat after a crash is harmless, replies carry stable ids)."""
        ...

    @property
    def appended_since_checkpoint(self) -> int:
        """Writes since the last ``checkpoint``: what a boot would read back."""
        ...

    async def checkpoint(self) -> None:
        """Drop what finished items left behind, so a boot reads only what is pending."""
        ...
