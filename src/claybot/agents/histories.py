"""Reading agents' histories: pages, time windows and whole, numbered from 0 (``seq``).

What the API, the dashboard and the agents' own tools read through
``AgentSystem.histories``; each read names an agent the directory knows
(``AgentNotFound`` otherwise) and its cost does not grow with the history's length.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from claybot.agents.directory import AgentDirectory, AgentNotFound
from claybot.agents.durable_port import AgentStore
from claybot.agents.history import RawRecord


@dataclass(frozen=True)
class HistoryPage:
    records: list[RawRecord]  # lines as read: a dict on purpose (``RawRecord``)
    total: int


class AgentHistories:
    def __init__(self, directory: AgentDirectory, store: AgentStore) -> None:
        self._directory = directory
        self._store = store

    def _known(self, agent_id: str) -> None:
        if agent_id not in self._directory:
            raise AgentNotFound(agent_id)

    async def page(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> HistoryPage:
        """Records numbered from 0 (``seq``), ``limit`` at most, oldest first."""
        self._known(agent_id)
        records, total = await self._store.read_history_page(
            agent_id, after=after, before=before, limit=limit
        )
        return HistoryPage(records, total)

    async def window(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> HistoryPage:
        """A page as the API asks for it: without ``after``, the newest ``limit`` records
        (below ``before`` if given); with ``after``, the oldest ``limit`` above it, of
        which those from ``before`` on are left out (after < seq < before)."""
        if after is None or before is None:
            return await self.page(agent_id, after=after, before=before, limit=limit)
        page = await self.page(agent_id, after=after, before=None, limit=limit)
        return HistoryPage(
            [record for record in page.records if record["seq"] < before], page.total
        )

    async def between(
        self, agent_id: str, *, from_at: int | None, to_at: int | None, limit: int
    ) -> list[RawRecord]:
        """The last ``limit`` records written between two times (unix ms, included).
        Each is a dict (``RawRecord``) because it is the line as read, unknown types and
        fields kept, for the API page and the agents' history tool to show as it is."""
        self._known(agent_id)
        return await self._store.read_history_between(
            agent_id, from_at=from_at, to_at=to_at, limit=limit
        )

    async def whole(self, agent_id: str) -> tuple[int, AsyncIterator[list[RawRecord]]]:
        """Every record, numbered from 0, in chunks (see ``AgentStore.read_whole_history``).
        Each is a dict (``RawRecord``) because it is the line as read, unknown types and
        fields kept, for the API's download to give back as the file holds it."""
        self._known(agent_id)
        return await self._store.read_whole_history(agent_id)
