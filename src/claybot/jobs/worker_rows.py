"""The ``workers`` table: who is working on jobs, from where, and when it was last heard of.

A worker is ``active``, ``draining`` while it gives its jobs back, ``stopped`` once it
said so as it stopped cleanly, and ``dead`` when it went silent without a word for
longer than the lease (it was killed, or its machine or network went away): by then
its jobs have gone back to the queue too. Rows of workers that are gone age out:
a stopped one after ``STOPPED_KEPT`` (a clean stop is news only briefly: it confirms a
drain), a dead one after ``DEAD_KEPT`` (long enough to be noticed the next day). So a
list of workers is who works now and who was lost lately, not every process that ever
ran.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, and_, delete, insert, or_, select, update

from claybot.db.errors import wrap_database_errors
from claybot.db.tables import workers
from claybot.jobs.model import WorkerStatus
from claybot.jobs.sql import JobTables, at
from claybot.jobs.writer import Events

SILENT: tuple[WorkerStatus, ...] = ("active", "draining")  # those that may go silent
STOPPED_KEPT = timedelta(hours=1)
DEAD_KEPT = timedelta(hours=24)


@dataclass(frozen=True)
class WorkerRow:
    id: str
    hostname: str
    pid: int
    version: str
    status: WorkerStatus
    active_jobs: int
    last_heartbeat: datetime
    created_at: datetime


@dataclass(frozen=True)
class Swept:
    dead: int  # workers newly found silent
    removed: int  # rows of workers gone long enough


def aged_out(now: datetime) -> ColumnElement[bool]:
    """Rows no list shows any more, and the sweep deletes."""
    last = workers.c.last_heartbeat
    return or_(
        and_(workers.c.status == "stopped", last < now - STOPPED_KEPT),
        and_(workers.c.status != "stopped", last < now - DEAD_KEPT),
    )


class WorkerRows:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

    @property
    def dead_after(self) -> timedelta:
        """A worker silent this long has lost its jobs' leases: it is dead."""
        return self._db.lease

    async def heartbeat(
        self, worker_id: str, *, hostname: str, pid: int, version: str, active_jobs: int,
        status: WorkerStatus = "active",
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

    async def listing(self, status: WorkerStatus | None = None) -> list[WorkerRow]:
        """The workers as of now, oldest first: one silent past ``dead_after`` is listed
        dead even before a sweep marks it (no worker may be running to sweep), and rows
        aged out are left out."""
        now = self._db.clock()
        query = select(workers).where(~aged_out(now)).order_by(workers.c.created_at)
        async with wrap_database_errors("listing workers"), self._db.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        listed = [
            self._as_of(
                now,
                WorkerRow(
                    row.id,
                    row.hostname,
                    row.pid,
                    row.version,
                    row.status,
                    row.active_jobs,
                    at(row.last_heartbeat),
                    at(row.created_at),
                ),
            )
            for row in rows
        ]
        return [row for row in listed if status is None or row.status == status]

    def _as_of(self, now: datetime, row: WorkerRow) -> WorkerRow:
        if row.status in SILENT and row.last_heartbeat < now - self.dead_after:
            return replace(row, status="dead", active_jobs=0)
        return row

    async def sweep(self) -> Swept:
        """Mark the workers silent past ``dead_after`` dead, and delete aged-out rows."""
        now = self._db.clock()
        cutoff = now - self.dead_after

        def write(connection: Connection, _events: Events) -> Swept:
            dead = connection.execute(
                update(workers)
                .where(workers.c.last_heartbeat < cutoff, workers.c.status.in_(SILENT))
                .values(status="dead", active_jobs=0)
            )
            removed = connection.execute(delete(workers).where(aged_out(now)))
            return Swept(int(dead.rowcount), int(removed.rowcount))

        return await self._db.write("sweeping workers", write)
