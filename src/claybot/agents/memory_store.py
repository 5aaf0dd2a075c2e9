"""The agents' durable state in memory: the twin of the files (see ``durable_port.py``).

``MemoryDisk`` plays the group-commit writer of both stores: a write is queued,
and one sync, a turn of the loop after a write someone waits for, makes every
queued write durable at once. ``crash()`` keeps only what was made durable; stores
opened on what it returns see what a restarted engine would. Records are kept as
the JSON lines the files hold, so what cannot be written there cannot be here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from claybot.agents.durable_port import (
    HISTORY_CHUNK,
    AgentProblem,
    AgentStoreError,
    IndexEntry,
    StoredAgent,
)
from claybot.agents.history import RawRecord, damaged_placeholder, history_tail, turn_records
from claybot.agents.inbox import InboxItem, InboxRecord
from claybot.agents.inbox_ledger import InboxLedger
from claybot.agents.records import HistoryRecord, StartRecord, encode_record_line
from claybot.agents.state import AgentState
from claybot.durable.jsonl import parse_line

Write = Callable[["MemoryImage"], None]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class MemoryImage:
    """What is durable: each agent's entry, state and history lines, and the inbox log."""

    index: dict[str, IndexEntry] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    set_aside: dict[str, dict[str, Any]] = field(default_factory=dict)
    histories: dict[str, list[bytes]] = field(default_factory=dict)
    history_written_ms: dict[str, int] = field(default_factory=dict)
    inbox: list[InboxRecord] = field(default_factory=list)

    def copy(self) -> MemoryImage:
        return MemoryImage(
            dict(self.index),
            dict(self.states),
            dict(self.set_aside),
            {agent_id: list(lines) for agent_id, lines in self.histories.items()},
            dict(self.history_written_ms),
            list(self.inbox),
        )


class MemoryDisk:
    """The writer both memory stores share, over the durable image."""

    def __init__(self, image: MemoryImage | None = None) -> None:
        self.image = image or MemoryImage()
        self._queued: list[Write] = []
        self._waiting: list[asyncio.Future[None]] = []

    def write(self, change: Write) -> asyncio.Future[None]:
        """Queue a change; the future resolves once it (and all queued before) is durable."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._waiting:
            asyncio.get_running_loop().call_soon(self._sync)
        self._waiting.append(future)
        self._queued.append(change)
        return future

    def write_nowait(self, change: Write) -> None:
        self._queued.append(change)

    def write_now(self, change: Write) -> None:
        """A write that is durable when it returns (a file replaced atomically)."""
        change(self.image)

    async def flush(self) -> None:
        if self._queued:
            await self.write(lambda image: None)

    def _sync(self) -> None:
        queued, self._queued = self._queued, []
        waiting, self._waiting = self._waiting, []
        for change in queued:
            change(self.image)
        for future in waiting:
            if not future.done():
                future.set_result(None)

    def crash(self) -> MemoryImage:
        """The engine died: what a restart finds (the queued writes are lost)."""
        self._queued.clear()
        return self.image.copy()


class MemoryAgentStore:
    """``AgentStore`` in memory: what it answers includes the queued writes."""

    def __init__(self, disk: MemoryDisk, *, now_ms: Callable[[], int] = wall_ms) -> None:
        self._disk = disk
        self._now_ms = now_ms
        live = disk.image.copy()  # as a boot reads the files
        self._index = live.index
        self._states = live.states
        self._histories = live.histories
        self._written_ms = live.history_written_ms

    @property
    def unroutable(self) -> list[AgentProblem]:
        return []  # an entry here is never unreadable

    async def load_index(self) -> list[IndexEntry]:
        return list(self._index.values())

    async def create(self, entry: IndexEntry, state: AgentState, start: StartRecord) -> None:
        agent_id = entry.agent_id
        if agent_id in self._index:
            raise FileExistsError(f"agent {agent_id!r} exists")
        data = state.model_dump(mode="json")
        line = encode_record_line(start)
        now = self._now_ms()

        def create(image: MemoryImage) -> None:
            image.index[agent_id] = entry
            image.states[agent_id] = data
            image.histories[agent_id] = [line]
            image.history_written_ms[agent_id] = now

        create(self._disk.image)
        self._index[agent_id] = entry
        self._states[agent_id] = data
        self._histories[agent_id] = [line]
        self._written_ms[agent_id] = now
        await self._disk.flush()  # the index line waits for the writer, as on files

    # -- state ------------------------------------------------------------------------

    async def read_agent(
        self, agent_id: str, *, repair: bool, context_records: int, message_ids: int
    ) -> StoredAgent:
        state, damaged = None, None
        try:
            state = self._state(agent_id)
        except AgentStoreError as exc:
            damaged = exc
        lines = self._histories.get(agent_id, [])
        history = history_tail(
            reversed(lines), context_records=context_records, message_ids=message_ids
        )
        return StoredAgent(state, damaged, history)

    def _state(self, agent_id: str) -> AgentState | None:
        data = self._states.get(agent_id)
        if data is None:
            return None
        try:
            return AgentState.model_validate(data)
        except ValidationError as exc:
            raise AgentStoreError(f"memory:{agent_id}/state", str(exc)) from exc

    async def read_state(self, agent_id: str) -> AgentState | None:
        return self._state(agent_id)

    async def read_states(self, agent_ids: list[str]) -> dict[str, AgentState | None]:
        states: dict[str, AgentState | None] = {}
        for agent_id in agent_ids:
            try:
                states[agent_id] = self._state(agent_id)
            except AgentStoreError:
                states[agent_id] = None
        return states

    async def set_aside_state(self, agent_id: str) -> str:
        data = self._states.pop(agent_id)

        def set_aside(image: MemoryImage) -> None:
            image.states.pop(agent_id, None)
            image.set_aside[agent_id] = data

        self._disk.write_now(set_aside)
        return f"memory:{agent_id}/state.damaged"

    async def write_state(self, agent_id: str, state: AgentState) -> None:
        await self.write_states({agent_id: state.model_dump(mode="json")})

    async def write_states(self, states: dict[str, dict[str, Any]]) -> None:
        copies = {agent_id: dict(data) for agent_id, data in states.items()}
        self._states.update(copies)
        self._disk.write_now(lambda image: image.states.update(copies))

    # -- history ----------------------------------------------------------------------

    def _queue(self, agent_id: str, record: HistoryRecord) -> Write:
        line = encode_record_line(record)
        now = self._now_ms()
        self._histories.setdefault(agent_id, []).append(line)
        self._written_ms[agent_id] = now

        def append(image: MemoryImage) -> None:
            image.histories.setdefault(agent_id, []).append(line)
            image.history_written_ms[agent_id] = now

        return append

    def append_history(self, agent_id: str, record: HistoryRecord) -> asyncio.Future[None]:
        return self._disk.write(self._queue(agent_id, record))

    def append_history_nowait(self, agent_id: str, record: HistoryRecord) -> None:
        self._disk.write_nowait(self._queue(agent_id, record))

    def _numbered(self, agent_id: str, first: int, stop: int) -> list[RawRecord]:
        lines = self._histories.get(agent_id, [])
        return [
            {
                "seq": number,
                **(parse_line(lines[number]) or damaged_placeholder(number + 1, lines[number])),
            }
            for number in range(first, stop)
        ]

    async def read_written_history(self, agent_id: str) -> list[RawRecord]:
        lines = self._histories.get(agent_id, [])
        return [
            parse_line(line) or damaged_placeholder(n + 1, line) for n, line in enumerate(lines)
        ]

    async def read_written_turn(self, agent_id: str, message_id: str) -> list[HistoryRecord]:
        return turn_records(reversed(self._histories.get(agent_id, [])), message_id)

    async def read_history_page(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> tuple[list[RawRecord], int]:
        count = len(self._histories.get(agent_id, []))
        if after is not None:
            first, stop = after + 1, after + 1 + limit
        else:
            stop = count if before is None else max(0, min(before, count))
            first = stop - limit
        first, stop = max(0, first), min(stop, count)
        return (self._numbered(agent_id, first, stop) if first < stop else []), count

    async def read_history_between(
        self, agent_id: str, *, from_at: int | None, to_at: int | None, limit: int
    ) -> list[RawRecord]:
        records = await self.read_written_history(agent_id)
        times = [at if isinstance(at := record.get("at"), int) else 0 for record in records]
        first = 0 if from_at is None else sum(1 for at in times if at < from_at)
        stop = len(times) if to_at is None else sum(1 for at in times if at <= to_at)
        return self._numbered(agent_id, max(first, stop - limit), stop)

    async def read_whole_history(
        self, agent_id: str, *, chunk: int = HISTORY_CHUNK
    ) -> tuple[int, AsyncIterator[list[RawRecord]]]:
        total = len(self._histories.get(agent_id, []))

        async def chunks() -> AsyncIterator[list[RawRecord]]:
            for first in range(0, total, chunk):
                yield self._numbered(agent_id, first, min(first + chunk, total))

        return total, chunks()

    def history_updated_ms(self, agent_id: str) -> int:
        return self._written_ms.get(agent_id, 0)

    def release(self, agent_id: str) -> None:
        return None  # nothing is held open

    async def flush(self) -> None:
        await self._disk.flush()

    async def has_backlog(self) -> bool:
        return False  # this disk never refuses a write


class MemoryInbox(InboxLedger):
    """``InboxStore`` in memory, over the inbox log's records."""

    def __init__(self, disk: MemoryDisk) -> None:
        super().__init__()
        self._disk = disk

    async def recover(self) -> list[InboxItem]:
        items = self._restore(self._disk.image.inbox)
        self._compact()
        return items

    def _compact(self) -> None:
        kept = list(self._kept_records())
        self._disk.write_now(lambda image: setattr(image, "inbox", kept))

    def _write(self, record: InboxRecord) -> asyncio.Future[None]:
        return self._disk.write(lambda image: image.inbox.append(record))

    def _write_nowait(self, record: InboxRecord) -> None:
        self._disk.write_nowait(lambda image: image.inbox.append(record))

    async def checkpoint(self) -> None:
        await self._disk.flush()
        self._compact()
        self._appended = 0
