"""A job's log (``job_logs``): what it did, in order, readable while it runs."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from claybot.db.driver_statement import DriverStatement
from claybot.db.errors import wrap_database_errors
from claybot.db.tables import job_logs
from claybot.jobs.model import Claim, LogLine
from claybot.jobs.sql import JobTables, at
from claybot.jobs.writer import Events
from claybot.kernel.event_types import EventType


class JobLogs:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

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

        def write(connection: Connection, events: Events) -> bool:
            if claim is not None:
                self._db.fence(connection, claim)
            return add_log(connection, events, job_id, message, level, metadata, now, step_key)

        return await self._db.write("writing a job log", write, job_id=job_id)

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


LOG_COLUMNS = ("job_id", "level", "message", "metadata", "timestamp", "step_key")


def add_log(
    connection: Connection,
    events: Events,
    job_id: str,
    message: str,
    level: str,
    metadata: dict[str, Any] | None,
    now: datetime,
    step_key: str | None = None,
) -> bool:
    """A log line, inside a write that already holds what it needs (the fence). A line
    whose step wrote one before is not written again (False); the unique step key
    decides it in the same statement."""
    added = (
        _add_log_statement(connection.dialect.name)
        .execute(
            connection,
            {
                "job_id": job_id,
                "level": level,
                "message": message,
                "metadata": metadata,
                "timestamp": now,
                "step_key": step_key,
            },
        )
        .first
    )
    if added is None:  # its step wrote it before
        return False
    events.append(
        (EventType.JOB_LOG, {"jobId": job_id, "id": added[0], "level": level, "message": message})
    )
    return True


@functools.cache
def _add_log_statement(dialect: str) -> DriverStatement:
    """INSERT ... ON CONFLICT (job_id, step_key) DO NOTHING RETURNING id, for the
    dialect (both spell it alike, but each through its own insert)."""
    from sqlalchemy.dialects import postgresql, sqlite

    dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return DriverStatement(
        dialect_insert(job_logs)
        .on_conflict_do_nothing(index_elements=[job_logs.c.job_id, job_logs.c.step_key])
        .returning(job_logs.c.id),
        LOG_COLUMNS,
    )
