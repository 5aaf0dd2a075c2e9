"""The engine's jobs: the job database once the engine's database is open, its events
on the engine's stream, and the workers that run inside the engine."""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

from claybot.config.settings import JobSettings
from claybot.engine.keystore import BackgroundDatabase
from claybot.kernel.events import EventBus

if TYPE_CHECKING:
    from claybot.jobs.database import JobDatabase


class JobsHost:
    def __init__(self, database: BackgroundDatabase, events: EventBus) -> None:
        self._database = database
        self._events = events
        self._jobs: asyncio.Task[JobDatabase] | None = None
        self._unsubscribe: Any = None
        self.settings = JobSettings()

    async def database(self) -> JobDatabase:
        """The job database (waits for the engine's database to open; StoreError if it
        cannot be)."""
        if self._jobs is None:
            self._jobs = asyncio.create_task(self._open())
        return await asyncio.shield(self._jobs)

    async def _open(self) -> JobDatabase:
        engine = await self._database.engine()
        module = await asyncio.to_thread(importlib.import_module, "claybot.jobs.database")
        jobs: JobDatabase = module.JobDatabase(
            engine,
            max_file_bytes=self.settings.max_file_bytes,
        )
        self._unsubscribe = jobs.tables.subscribe(self._relay)
        return jobs

    def _relay(self, kind: str, payload: dict[str, Any]) -> None:
        self._events.emit(kind, payload)

    async def stop(self) -> None:
        if self._jobs is not None and not self._jobs.done():
            self._jobs.cancel()
            await asyncio.gather(self._jobs, return_exceptions=True)
        if self._unsubscribe is not None:
            self._unsubscribe()
