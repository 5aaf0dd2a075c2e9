"""The job store's parts over one database: jobs and claims, logs, files, workers and
the MCP registry."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from claybot.jobs.files import JobFiles
from claybot.jobs.logs import JobLogs
from claybot.jobs.port import DEFAULT_LEASE, JobLogStore, JobStore
from claybot.jobs.registry import McpRegistry
from claybot.jobs.sql import Clock, JobTables, utcnow
from claybot.jobs.store import SqlJobStore
from claybot.jobs.worker_rows import WorkerRows

DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024  # seed 002's upload cap


class JobDatabase:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utcnow,
        lease: timedelta = DEFAULT_LEASE,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.tables = JobTables(engine, clock=clock, lease=lease, max_file_bytes=max_file_bytes)
        self.jobs: JobStore = SqlJobStore(self.tables)
        self.logs: JobLogStore = JobLogs(self.tables)
        self.files = JobFiles(self.tables)
        self.workers = WorkerRows(self.tables)
        self.registry = McpRegistry(self.tables)

    async def close(self) -> None:
        """Finish the queued writes and close the writer's connection (the engine the
        database was opened with stays the caller's)."""
        await self.tables.close()
