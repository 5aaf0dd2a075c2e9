"""The agents' durable state in PostgreSQL: ``AgentStore`` and ``InboxStore`` over the
tables of migration 0008 (``agent_index``, ``agent_history``, ``agent_inbox``).

Written as the files are: ``SqlWriter`` group-commits the writes of both stores,
one transaction for everything queued when a write someone waits for comes, so a
thousand accepted messages cost one commit, not a thousand. A read first waits for
what is queued, so it sees every write before it. History records are the JSON
lines the files hold, numbered from 0 as the file's lines are; the inbox is the
inbox log's records in their order.

What cluster mode will add (DESIGN §5): one owner per agent by lease, with its
generation in every write; a checkpoint that deletes only finished items (it
rewrites the whole log here, as the file does); and reading a history's tail,
not all of it, when an agent loads.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from sqlalchemy import Select, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from claybot.agents.descriptors import descriptor_to_dict, parse_descriptor
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
from claybot.agents.records import DamagedRecord, HistoryRecord, StartRecord, encode_record_line
from claybot.agents.state import AgentState
from claybot.db.errors import StoreError, wrap_database_errors
from claybot.db.tables import agent_history, agent_inbox, agent_index
from claybot.durable.jsonl import parse_line

Change = Callable[[AsyncConnection], Awaitable[Any]]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SqlWriter:
    """The writes of both stores, group-committed: each batch is one transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._queued: list[tuple[Change, asyncio.Future[None] | None]] = []
        self._batch: asyncio.Task[None] | None = None

    def write(self, change: Change) -> asyncio.Future[None]:
        """Queue a change; the future resolves once it (and all queued before) committed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.append((change, future))
        if self._batch is None:
            self._batch = asyncio.get_running_loop().create_task(self._run())
        return future

    def write_nowait(self, change: Change) -> None:
        """Queue a change, committed with the next write that is waited for."""
        self._queued.append((change, None))

    async def flush(self) -> None:
        if self._queued or self._batch is not None:
            await self.write(_nothing)

    @property
    def backlog(self) -> int:
        """Unwaited changes of a batch that failed, tried again with the next one."""
        return 0 if self._batch is not None else len(self._queued)

    async def _run(self) -> None:
        try:
            while any(future is not None for _, future in self._queued):
                batch, self._queued = self._queued, []
                try:
                    async with (
                        wrap_database_errors("writing the agents' state"),
                        self.engine.begin() as connection,
                    ):
                        for change, _ in batch:
                            await change(connection)
                except Exception as exc:
                    # Nothing of the batch was written. Who waits hears why; what nobody
                    # waits for goes again, first, with the next batch.
                    self._queued[:0] = [(change, None) for change, f in batch if f is None]
                    for _, future in batch:
                        if future is not None and not future.done():
                            future.set_exception(exc)
                    continue
                for _, future in batch:
                    if future is not None and not future.done():
                        future.set_result(None)
        finally:
            self._batch = None


async def _nothing(connection: AsyncConnection) -> None:
    return None


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _line(record: HistoryRecord) -> str:
    return encode_record_line(record)[:-1].decode()  # as the file's line, without its newline


def _record(seq: int, line: str) -> RawRecord:
    data = line.encode()
    return parse_line(data) or damaged_placeholder(seq + 1, data)


def _at(record: HistoryRecord) -> int:
    return 0 if isinstance(record, DamagedRecord) else record.at  # a damaged one is never written


class PostgresAgentStore:
    """``AgentStore`` over ``agent_index`` and ``agent_history``."""

    def __init__(self, writer: SqlWriter, *, now_ms: Callable[[], int] = wall_ms) -> None:
        self._writer = writer
        self._engine = writer.engine
        self._now_ms = now_ms
        # When each agent's history was last written: read at boot, kept since.
        self._written_ms: dict[str, int] = {}

    @property
    def unroutable(self) -> list[AgentProblem]:
        return []  # a descriptor is validated before it is inserted

    async def load_index(self) -> list[IndexEntry]:
        query = select(
            agent_index.c.agent_id,
            agent_index.c.descriptor,
            agent_index.c.created_at,
            agent_index.c.history_written_at,
        ).order_by(agent_index.c.created_at, agent_index.c.agent_id)
        async with wrap_database_errors("reading the agents"), self._engine.connect() as db:
            rows = (await db.execute(query)).all()
        entries = []
        for agent_id, descriptor, created_at, written_at in rows:
            entries.append(
                IndexEntry(agent_id, parse_descriptor(orjson.loads(descriptor)), created_at)
            )
            self._written_ms[agent_id] = written_at
        return entries

    async def create(self, entry: IndexEntry, state: AgentState, start: StartRecord) -> None:
        now = self._now_ms()

        async def create(db: AsyncConnection) -> None:
            await db.execute(
                insert(agent_index).values(
                    agent_id=entry.agent_id,
                    descriptor=_json(descriptor_to_dict(entry.descriptor)),
                    created_at=entry.created_at,
                    state=_json(state.model_dump(mode="json")),
                    history_written_at=now,
                )
            )
            await db.execute(
                insert(agent_history).values(
                    agent_id=entry.agent_id, seq=0, at=_at(start), line=_line(start)
                )
            )

        await self._writer.write(create)
        self._written_ms[entry.agent_id] = now

    # -- state ------------------------------------------------------------------------

    async def _states(self, agent_ids: list[str]) -> dict[str, str | None]:
        await self._writer.flush()
        query = select(agent_index.c.agent_id, agent_index.c.state).where(
            agent_index.c.agent_id.in_(agent_ids)
        )
        async with wrap_database_errors("reading agents' states"), self._engine.connect() as db:
            return {agent_id: state for agent_id, state in (await db.execute(query)).all()}

    @staticmethod
    def _parse_state(agent_id: str, data: str | None) -> AgentState | None:
        if data is None:
            return None
        try:
            return AgentState.model_validate_json(data)
        except ValueError as exc:
            raise AgentStoreError(f"agent_index.state of {agent_id}", str(exc)) from exc

    async def read_state(self, agent_id: str) -> AgentState | None:
        states = await self._states([agent_id])
        return self._parse_state(agent_id, states.get(agent_id))

    async def read_states(self, agent_ids: list[str]) -> dict[str, AgentState | None]:
        found = await self._states(agent_ids)
        states: dict[str, AgentState | None] = {}
        for agent_id in agent_ids:
            try:
                states[agent_id] = self._parse_state(agent_id, found.get(agent_id))
            except AgentStoreError:
                states[agent_id] = None
        return states

    async def read_agent(
        self, agent_id: str, *, repair: bool, context_records: int, message_ids: int
    ) -> StoredAgent:
        state, damaged = None, None
        try:
            state = await self.read_state(agent_id)
        except AgentStoreError as exc:
            damaged = exc
        lines = await self._lines(agent_id, select_newest_first=True)
        history = history_tail(
            (line.encode() for line in lines),
            context_records=context_records,
            message_ids=message_ids,
        )
        return StoredAgent(state, damaged, history)

    async def set_aside_state(self, agent_id: str) -> str:
        row = agent_index.c

        async def set_aside(db: AsyncConnection) -> None:
            await db.execute(
                update(agent_index)
                .where(row.agent_id == agent_id)
                .values(state_set_aside=row.state, state=None)
            )

        await self._writer.write(set_aside)
        return f"agent_index.state_set_aside of {agent_id}"

    async def write_state(self, agent_id: str, state: AgentState) -> None:
        await self.write_states({agent_id: state.model_dump(mode="json")})

    async def write_states(self, states: dict[str, dict[str, Any]]) -> None:
        if not states:
            return
        values = [(agent_id, _json(data)) for agent_id, data in states.items()]

        async def write(db: AsyncConnection) -> None:
            for agent_id, data in values:
                await db.execute(
                    update(agent_index).where(agent_index.c.agent_id == agent_id).values(state=data)
                )

        await self._writer.write(write)

    # -- history ----------------------------------------------------------------------

    def _append(self, agent_id: str, record: HistoryRecord) -> Change:
        line, at, now = _line(record), _at(record), self._now_ms()
        self._written_ms[agent_id] = now
        history = agent_history.c

        async def append(db: AsyncConnection) -> None:
            # Numbered here, in the batch's order: a history has one writer (its owner).
            next_seq = select(func.coalesce(func.max(history.seq) + 1, 0)).where(
                history.agent_id == agent_id
            )
            await db.execute(
                insert(agent_history).values(
                    agent_id=agent_id, seq=next_seq.scalar_subquery(), at=at, line=line
                )
            )
            await db.execute(
                update(agent_index)
                .where(agent_index.c.agent_id == agent_id)
                .values(history_written_at=now)
            )

        return append

    def append_history(self, agent_id: str, record: HistoryRecord) -> asyncio.Future[None]:
        return self._writer.write(self._append(agent_id, record))

    def append_history_nowait(self, agent_id: str, record: HistoryRecord) -> None:
        self._writer.write_nowait(self._append(agent_id, record))

    async def _fetch(self, query: Select[Any], action: str) -> list[Any]:
        await self._writer.flush()
        async with wrap_database_errors(action), self._engine.connect() as db:
            return list((await db.execute(query)).all())

    async def _lines(self, agent_id: str, *, select_newest_first: bool = False) -> list[str]:
        seq = agent_history.c.seq
        query = (
            select(agent_history.c.line)
            .where(agent_history.c.agent_id == agent_id)
            .order_by(seq.desc() if select_newest_first else seq)
        )
        return [line for (line,) in await self._fetch(query, "reading a history")]

    async def _numbered(self, agent_id: str, first: int, stop: int) -> list[RawRecord]:
        history = agent_history.c
        query = (
            select(history.seq, history.line)
            .where(history.agent_id == agent_id, history.seq >= first, history.seq < stop)
            .order_by(history.seq)
        )
        rows = await self._fetch(query, "reading a history")
        return [{"seq": seq, **_record(seq, line)} for seq, line in rows]

    async def _count(self, agent_id: str, *conditions: Any) -> int:
        history = agent_history.c
        query = (
            select(func.count())
            .select_from(agent_history)
            .where(history.agent_id == agent_id, *conditions)
        )
        [(count,)] = await self._fetch(query, "counting a history")
        return int(count)

    async def read_written_history(self, agent_id: str) -> list[RawRecord]:
        return [_record(n, line) for n, line in enumerate(await self._lines(agent_id))]

    async def read_written_turn(self, agent_id: str, message_id: str) -> list[HistoryRecord]:
        lines = await self._lines(agent_id, select_newest_first=True)
        return turn_records((line.encode() for line in lines), message_id)

    async def read_history_page(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> tuple[list[RawRecord], int]:
        count = await self._count(agent_id)
        if after is not None:
            first, stop = after + 1, after + 1 + limit
        else:
            stop = count if before is None else max(0, min(before, count))
            first = stop - limit
        first, stop = max(0, first), min(stop, count)
        return (await self._numbered(agent_id, first, stop) if first < stop else []), count

    async def read_history_between(
        self, agent_id: str, *, from_at: int | None, to_at: int | None, limit: int
    ) -> list[RawRecord]:
        at = agent_history.c.at
        first = 0 if from_at is None else await self._count(agent_id, at < from_at)
        stop = (
            await self._count(agent_id)
            if to_at is None
            else await self._count(agent_id, at <= to_at)
        )
        return await self._numbered(agent_id, max(first, stop - limit), stop)

    async def read_whole_history(
        self, agent_id: str, *, chunk: int = HISTORY_CHUNK
    ) -> tuple[int, AsyncIterator[list[RawRecord]]]:
        total = await self._count(agent_id)

        async def chunks() -> AsyncIterator[list[RawRecord]]:
            for first in range(0, total, chunk):
                yield await self._numbered(agent_id, first, min(first + chunk, total))

        return total, chunks()

    def history_updated_ms(self, agent_id: str) -> int:
        return self._written_ms.get(agent_id, 0)

    def release(self, agent_id: str) -> None:
        return None  # nothing is held open per agent

    async def flush(self) -> None:
        await self._writer.flush()

    async def has_backlog(self) -> bool:
        # What nobody waited for is kept for the next batch when one fails: the backlog.
        with contextlib.suppress(StoreError):
            await self._writer.flush()
        return self._writer.backlog > 0


class PostgresInbox(InboxLedger):
    """``InboxStore`` over ``agent_inbox``: the inbox log's records, in order."""

    def __init__(self, writer: SqlWriter) -> None:
        super().__init__()
        self._writer = writer

    async def recover(self) -> list[InboxItem]:
        query = select(agent_inbox.c.record).order_by(agent_inbox.c.id)
        async with wrap_database_errors("reading the inbox"), self._writer.engine.connect() as db:
            records = [orjson.loads(record) for (record,) in (await db.execute(query)).all()]
        items = self._restore(records)
        await self._writer.write(self._rewrite())
        return items

    def _rewrite(self) -> Change:
        kept = [{"record": _json(record)} for record in self._kept_records()]

        async def rewrite(db: AsyncConnection) -> None:
            await db.execute(delete(agent_inbox))
            if kept:
                await db.execute(insert(agent_inbox), kept)

        return rewrite

    @staticmethod
    def _append(record: InboxRecord) -> Change:
        value = _json(record)

        async def append(db: AsyncConnection) -> None:
            await db.execute(insert(agent_inbox).values(record=value))

        return append

    def _write(self, record: InboxRecord) -> asyncio.Future[None]:
        return self._writer.write(self._append(record))

    def _write_nowait(self, record: InboxRecord) -> None:
        self._writer.write_nowait(self._append(record))

    async def checkpoint(self) -> None:
        await self._writer.write(self._rewrite())
        self._appended = 0
