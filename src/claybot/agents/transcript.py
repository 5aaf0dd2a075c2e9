"""The transcript port: one conversation's records, as the turn loop reads and writes them.

The turn loop (``claybot.agents.turn_loop``) never touches files: it appends
records and reads them back through this protocol, and asks it whether a reply
was already delivered. An agent's transcript is its history plus its inbox item's
outbox marks, in whichever durable store the runtime runs on (``AgentTranscript``);
``MemoryTranscript`` keeps the same contract alone in memory (tests, and a model for
other stores: a job's rows in the database implement the same calls).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from claybot.agents.durable_port import AgentStore, InboxStore
from claybot.agents.history import of_turn
from claybot.agents.records import HistoryRecord, parse_record


class Transcript(Protocol):
    def append(self, record: HistoryRecord) -> None:
        """Queue a record; it is durable with the next ``append_durably`` (or sync)."""
        ...

    async def append_durably(self, record: HistoryRecord) -> None:
        """Append a record and return once it, and everything queued before it, is durable."""
        ...

    async def read(self) -> list[HistoryRecord]:
        """Every record so far, in order (those queued included); a line that is no
        record of its type is left out."""
        ...

    async def read_turn(self, item_id: str) -> list[HistoryRecord]:
        """The records of one item's turn so far, in order (those queued included)."""
        ...

    async def checkpoint(self) -> None:
        """A step of the turn (a tool's result) ended. A store that resumes a turn on
        another machine makes what is queued durable here; an agent's history does not
        need to (a tool whose result is lost is reported to the model as interrupted)."""
        ...

    def delivered(self, item_id: str, outgoing_id: str) -> bool:
        """Whether this reply of the item's turn already reached its recipient."""
        ...

    def mark_delivered(self, item_id: str, outgoing_id: str) -> None:
        """Remember a delivery (durable with the next sync; a repeat after a crash is
        harmless: replies carry stable ids that recipients drop when seen)."""
        ...


class AgentTranscript:
    """An agent's history and outbox marks, in the agents' durable stores."""

    def __init__(self, store: AgentStore, inbox_log: InboxStore, agent_id: str) -> None:
        self._store = store
        self._inbox = inbox_log
        self._agent_id = agent_id

    def append(self, record: HistoryRecord) -> None:
        self._store.append_history_nowait(self._agent_id, record)

    async def append_durably(self, record: HistoryRecord) -> None:
        await self._store.append_history(self._agent_id, record)

    async def read(self) -> list[HistoryRecord]:
        raw = await self._store.read_written_history(self._agent_id)
        return [record for record in map(parse_record, raw) if record is not None]

    async def read_turn(self, item_id: str) -> list[HistoryRecord]:
        return await self._store.read_written_turn(self._agent_id, item_id)

    async def checkpoint(self) -> None:
        return None

    def delivered(self, item_id: str, outgoing_id: str) -> bool:
        return self._inbox.already_sent((self._agent_id, item_id), outgoing_id)

    def mark_delivered(self, item_id: str, outgoing_id: str) -> None:
        self._inbox.mark_sent((self._agent_id, item_id), outgoing_id)


class MemoryTranscript:
    """The same contract in memory; ``crash()`` drops what was not made durable."""

    def __init__(
        self,
        records: list[HistoryRecord] | None = None,
        *,
        delivered: set[tuple[str, str]] | None = None,
    ) -> None:
        self.durable: list[HistoryRecord] = list(records or [])
        self._queued: list[HistoryRecord] = []
        self._delivered: set[tuple[str, str]] = set(delivered or ())
        self._queued_deliveries: set[tuple[str, str]] = set()

    def append(self, record: HistoryRecord) -> None:
        self._queued.append(record)

    async def append_durably(self, record: HistoryRecord) -> None:
        self._queued.append(record)
        await asyncio.sleep(0)  # a real store suspends here too
        self.durable.extend(self._queued)
        self._queued.clear()
        self._delivered |= self._queued_deliveries
        self._queued_deliveries.clear()

    async def read(self) -> list[HistoryRecord]:
        return [*self.durable, *self._queued]

    async def read_turn(self, item_id: str) -> list[HistoryRecord]:
        return of_turn(await self.read(), item_id)

    async def checkpoint(self) -> None:
        return None  # as an agent's history: what is queued is durable with the next sync

    def delivered(self, item_id: str, outgoing_id: str) -> bool:
        key = (item_id, outgoing_id)
        return key in self._delivered or key in self._queued_deliveries

    def mark_delivered(self, item_id: str, outgoing_id: str) -> None:
        self._queued_deliveries.add((item_id, outgoing_id))

    @property
    def durable_deliveries(self) -> set[tuple[str, str]]:
        return set(self._delivered)

    def crash(self) -> None:
        self._queued.clear()
        self._queued_deliveries.clear()
