"""Writing each agent's state file: one write at a time per agent, none after a delete."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from claybot.proactive.agent import LoadedAgent
from claybot.proactive.store import ProactiveStore

log = logging.getLogger(__name__)


class StateWriter:
    def __init__(self, store: ProactiveStore) -> None:
        self._store = store
        self._background: set[asyncio.Task[None]] = set()

    async def save(self, agent: LoadedAgent) -> None:
        async with agent.save_lock:
            if agent.deleted:
                return
            snapshot = agent.state.model_copy(deep=True)
            await asyncio.to_thread(self._store.write_state, agent.id, snapshot)

    def save_soon(self, agent: LoadedAgent) -> None:
        """Save from code that cannot await (a timer callback); ``drain`` waits for it."""
        task = asyncio.create_task(self.save(agent))
        self._background.add(task)
        task.add_done_callback(self._background_done)

    async def drain(self) -> None:
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await task

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "saving proactive state failed: %s; it is retried on the next change",
                task.exception(),
                extra={"action": "proactive.save_failed"},
            )
