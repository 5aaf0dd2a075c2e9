"""Statements on the driver's cursor write what SQLAlchemy writes, and fail as it fails."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError

from claybot.db.driver_statement import DriverStatement
from claybot.db.tables import job_records, workers
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import NewJob
from claybot.jobs.sql import at
from claybot.jobs.writer import Events

SEEN = datetime(2026, 11, 25, 13, 14, 15, 161718, tzinfo=UTC)
ADD_WORKER = DriverStatement(
    insert(workers), ("id", "hostname", "pid", "version", "last_heartbeat", "created_at")
)
ADD_RECORD = DriverStatement(insert(job_records), ("job_id", "seq", "record"))
RECORD = {"type": "note", "text": "naïve ✓", "nested": {"n": [1, 2.5, None, True]}}


async def test_datetimes_and_json_read_back_as_written_and_a_duplicate_is_an_integrity_error(
    jobs_db: JobDatabase,
) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))

    def write(connection: Connection, events: Events) -> None:
        added = ADD_WORKER.execute(
            connection,
            {"id": "w", "hostname": "h", "pid": 1, "version": "v",
             "last_heartbeat": SEEN, "created_at": SEEN},
        )  # fmt: skip
        assert (added.rowcount, added.first) == (1, None)  # no RETURNING: no row
        ADD_RECORD.executemany(
            connection, [{"job_id": job.id, "seq": n, "record": RECORD} for n in range(2)]
        )

    await jobs_db.tables.write("testing", write)
    async with jobs_db.tables.engine.connect() as connection:
        worker = (await connection.execute(select(workers))).one()
        records = (await connection.execute(select(job_records.c.record))).scalars().all()
    assert (worker.status, worker.active_jobs) == ("active", 0)  # the server's defaults
    assert at(worker.last_heartbeat) == SEEN
    assert records == [RECORD, RECORD]

    def again(connection: Connection, events: Events) -> None:
        ADD_RECORD.executemany(connection, [{"job_id": job.id, "seq": 1, "record": RECORD}])

    with pytest.raises(Exception) as raised:
        await jobs_db.tables.write("testing", again)
    assert isinstance(raised.value.__cause__, IntegrityError)
