"""Loading each run's agent shortly before its instant, so firing is quick.

Fifteen seconds before its instant a run's agent is loaded (or created): 1,000
runs due together are then posted in milliseconds rather than after 1,000 loads.
A warm-up whose run has moved meanwhile is dropped; one that fails is only
logged, as the run itself will report a real problem.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from claybot.cron.run import CronHost
from claybot.cron.store import CronTask
from claybot.kernel.clock import Clock
from claybot.scheduling.due_timer import DueTimer

log = logging.getLogger(__name__)

WARM_AHEAD = timedelta(seconds=15)
WARM_CONCURRENCY = 64


class AgentWarmer:
    """Warms the agent of each run on ``runs`` (the scheduler's timer) ahead of it."""

    def __init__(
        self, host: CronHost, clock: Clock, runs: DueTimer, tasks: Mapping[str, CronTask]
    ) -> None:
        self._host = host
        self._runs = runs
        self._tasks = tasks
        self._timer = DueTimer(clock)
        self._warming: set[asyncio.Task[None]] = set()

    def plan(self, task_id: str, due: datetime) -> None:
        self._timer.set(task_id, due - WARM_AHEAD)

    def discard(self, task_id: str) -> None:
        self._timer.discard(task_id)

    async def run(self) -> None:
        await self._timer.run(self._on_due)

    async def stop(self) -> None:
        warming = list(self._warming)
        for task in warming:
            task.cancel()
        await asyncio.gather(*warming, return_exceptions=True)

    async def _on_due(self, now: datetime) -> None:
        tasks: list[CronTask] = []
        for task_id, warm_at in self._timer.take_due(now):
            task = self._tasks.get(task_id)
            due = self._runs.get(task_id)
            if task is not None and due == warm_at + WARM_AHEAD and due > now:
                tasks.append(task)
        if tasks:
            warming = asyncio.create_task(self._warm(tasks), name="cron-warm")
            self._warming.add(warming)
            warming.add_done_callback(self._warming.discard)

    async def _warm(self, tasks: list[CronTask]) -> None:
        limit = asyncio.Semaphore(WARM_CONCURRENCY)

        async def one(task: CronTask) -> None:
            async with limit:
                try:
                    await self._host.prepare_run(task)
                except Exception:  # the run itself will report a real problem
                    log.debug("warming a cron agent failed", exc_info=True)

        await asyncio.gather(*(one(task) for task in tasks))
