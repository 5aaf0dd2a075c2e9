"""The ``workers`` table: who is working on jobs, from where, and when it was last heard of."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, insert, select, update

from claybot.db.errors import wrap_database_errors
from claybot.db.tables import workers
from claybot.jobs.sql import JobTables, at
from claybot.jobs.writer import Events


@dataclass(frozen=True)
class WorkerRow:
    id: str
    hostname: str
    pid: int
    version: str
    status: str
    active_jobs: int
    last_heartbeat: datetime
    created_at: datetime


class WorkerRows:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

    async def heartbeat(
        self, worker_id: str, *, hostname: str, pid: int, version: str, active_jobs: int,
        status: str = "active",
    ) -> None:  # fmt: skip
        now = self._db.clock()

        def write(connection: Connection, _events: Events) -> None:
            updated = connection.execute(
                update(workers)
                .where(workers.c.id == worker_id)
                .values(last_heartbeat=now, active_jobs=active_jobs, status=status)
            )
            if updated.rowcount == 0:
                connection.execute(
                    insert(workers).values(
                        id=worker_id,
                        hostname=hostname,
                        pid=pid,
                        version=version,
                        status=status,
                        active_jobs=active_jobs,
                        last_heartbeat=now,
                        created_at=now,
                    )
                )

        await self._db.write("recording a worker heartbeat", write)

    async def listing(self, status: str | None = None) -> list[WorkerRow]:
        query = select(workers).order_by(workers.c.created_at)
        if status is not None:
            query = query.where(workers.c.status == status)
        async with wrap_database_errors("listing workers"), self._db.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [
            WorkerRow(
                row.id,
                row.hostname,
                row.pid,
                row.version,
                row.status,
                row.active_jobs,
                at(row.last_heartbeat),
                at(row.created_at),
            )
            for row in rows
        ]

    async def mark_dead(self, older_than: timedelta) -> int:
        cutoff = self._db.clock() - older_than

        def write(connection: Connection, _events: Events) -> int:
            result = connection.execute(
                update(workers)
                .where(workers.c.last_heartbeat < cutoff, workers.c.status != "dead")
                .values(status="dead", active_jobs=0)
            )
            return int(result.rowcount)

        return await self._db.write("marking dead workers", write)
