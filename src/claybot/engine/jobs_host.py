"""The engine's jobs: the job database once the engine's database is open, its events
on the engine's stream (also those of jobs that ``claybot worker`` processes run),
and the worker that runs jobs inside the engine (``jobs.workers`` slots).

Nothing here holds up the engine's start: the database opens in the background,
and the worker starts when it is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claybot.config.settings import JobSettings
from claybot.db.errors import StoreError
from claybot.engine.keystore import BackgroundDatabase
from claybot.kernel.events import EventBus
from claybot.providers.router import InferenceRouter, router_for
from claybot.sandbox import Sandbox

if TYPE_CHECKING:
    from claybot.jobs.database import JobDatabase
    from claybot.jobs.signals import JobSignals
    from claybot.jobs.worker import Worker
    from claybot.net.egress import EgressProxy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobCounts:
    """Jobs by status and workers by status, or why the job database cannot tell."""

    jobs: dict[str, int] = field(default_factory=dict)
    workers: dict[str, int] = field(default_factory=dict)
    problem: str = ""


class JobsHost:
    def __init__(
        self,
        database: BackgroundDatabase,
        events: EventBus,
        sandbox: Sandbox,
        workroot: Path,
        egress: EgressProxy | None = None,  # run_python's network; None: the default
    ) -> None:
        self._database = database
        self._events = events
        self._sandbox = sandbox
        self._workroot = workroot
        self._egress = egress
        self._jobs: asyncio.Task[JobDatabase] | None = None
        self._starting: asyncio.Task[None] | None = None
        self.settings = JobSettings()
        self.signals: JobSignals | None = None
        self.worker: Worker | None = None

    @property
    def workroot(self) -> Path:
        """Where jobs' directories (and the MCP servers' logs) are."""
        return self._workroot

    async def database(self) -> JobDatabase:
        """The job database (waits for the engine's database to open; StoreError if it
        cannot be)."""
        if self._jobs is None:
            self._jobs = asyncio.create_task(self._open())
        return await asyncio.shield(self._jobs)

    async def counts(self) -> dict[str, int]:
        """Jobs by status, in one GROUP BY (StoreError if the database cannot be reached)."""
        return await (await self.database()).jobs.counts()

    async def counts_by_status(self, wait_s: float) -> JobCounts:
        """Jobs and workers by status, waiting at most ``wait_s`` for the database to
        open (a page that shows them should not wait for a slow start)."""
        try:
            async with asyncio.timeout(wait_s):
                database = await self.database()
            jobs = await database.jobs.counts()
            workers: dict[str, int] = {}
            for row in await database.workers.listing():
                workers[row.status] = workers.get(row.status, 0) + 1
        except TimeoutError:
            return JobCounts(problem="the job database is still opening")
        except StoreError as exc:
            return JobCounts(problem=str(exc))
        return JobCounts(jobs, workers)

    def start(self, settings: JobSettings, providers: InferenceRouter) -> None:
        """Start the in-engine worker once the database is open (in the background)."""
        self.settings = settings
        if settings.workers > 0 and self._starting is None:
            self._starting = asyncio.create_task(self._start_worker(providers), name="jobs-start")

    async def _open(self) -> JobDatabase:
        engine = await self._database.engine()
        module = await asyncio.to_thread(importlib.import_module, "claybot.jobs.database")
        signals_module = await asyncio.to_thread(importlib.import_module, "claybot.jobs.signals")
        jobs: JobDatabase = module.JobDatabase(
            engine,
            lease=timedelta(seconds=self.settings.lease_s),
            max_file_bytes=self.settings.max_file_bytes,
        )
        self.signals = signals_module.JobSignals(jobs.tables)
        assert self.signals is not None
        self.signals.subscribe(self._relay)
        self.signals.start()
        return jobs

    def _relay(self, kind: str, payload: dict[str, Any]) -> None:
        self._events.emit(kind, payload)

    async def _start_worker(self, providers: InferenceRouter) -> None:
        try:
            db = await self.database()
        except Exception as exc:  # the database could not open: said where it failed
            log.warning("jobs are not run: %s", exc, extra={"action": "jobs.unavailable"})
            return
        from claybot.jobs.runner import job_runner
        from claybot.jobs.worker import Worker

        runner = job_runner(
            db,
            partial(router_for, providers),
            self._sandbox,
            self._workroot,
            self.settings,
            self._egress,
        )
        assert self.signals is not None
        self.worker = Worker(db, runner, self.signals, slots=self.settings.workers)
        await self.worker.start()

    async def stop(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._starting
        if self.worker is not None:
            await self.worker.stop()
        if self.signals is not None:
            await self.signals.close()
        if self._jobs is not None and not self._jobs.done():
            self._jobs.cancel()
            await asyncio.gather(self._jobs, return_exceptions=True)
        elif self._jobs is not None and self._jobs.exception() is None:
            with contextlib.suppress(Exception):
                await self._jobs.result().close()
