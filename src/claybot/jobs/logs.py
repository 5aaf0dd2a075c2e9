"""A job's log (``job_logs``): what it did, in order, readable while it runs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select

from claybot.db.errors import wrap_database_errors
from claybot.db.tables import job_logs
from claybot.jobs.model import Claim, LogLine
from claybot.jobs.sql import JobTables, at, completes_once_started
from claybot.kernel.event_types import EventType


class JobLogs:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

    @completes_once_started
    async def add(
        self,
        job_id: str,
        message: str,
        *,
        level: str = "info",
        metadata: dict[str, Any] | None = None,
        claim: Claim | None = None,
        step_key: str | None = None,
    ) -> bool:
        """Add a log line; with ``step_key``, a line the same step wrote before is not
        written again (False). With ``claim`` the write is fenced."""
        now = self._db.clock()
        async with self._db.transaction("writing a job log") as (connection, events):
            if claim is not None:
                await self._db.fence(connection, claim)
            if step_key is not None:
                seen = await connection.execute(
                    select(job_logs.c.id).where(
                        job_logs.c.job_id == job_id, job_logs.c.step_key == step_key
                    )
                )
                if seen.first() is not None:
                    return False
            row = (
                await connection.execute(
                    insert(job_logs)
                    .values(
                        job_id=job_id,
                        level=level,
                        message=message,
                        metadata=metadata,
                        timestamp=now,
                        step_key=step_key,
                    )
                    .returning(job_logs.c.id)
                )
            ).first()
            assert row is not None
            events.append(
                (
                    EventType.JOB_LOG,
                    {"jobId": job_id, "id": row.id, "level": level, "message": message},
                )
            )
        return True

    async def page(
        self, job_id: str, *, after_id: int = 0, limit: int = 100, offset: int = 0
    ) -> list[LogLine]:
        async with (
            wrap_database_errors("reading job logs"),
            self._db.engine.connect() as connection,
        ):
            rows = await connection.execute(
                select(job_logs)
                .where(job_logs.c.job_id == job_id, job_logs.c.id > after_id)
                .order_by(job_logs.c.id)
                .limit(limit)
                .offset(offset)
            )
            return [
                LogLine(
                    row.id,
                    row.job_id,
                    row.level,
                    row.message,
                    row.metadata,
                    at(row.timestamp),
                )
                for row in rows
            ]

    async def step_keys(self, job_id: str) -> set[str]:
        """The steps that already wrote their log line (a resumed job skips them)."""
        async with (
            wrap_database_errors("reading job logs"),
            self._db.engine.connect() as connection,
        ):
            rows = await connection.execute(
                select(job_logs.c.step_key).where(
                    job_logs.c.job_id == job_id, job_logs.c.step_key.is_not(None)
                )
            )
            return {row.step_key for row in rows}
