"""A job's records as rows: their JSON is the record's line, and a row that is no
record of a known type keeps its place (and its number) without reaching the model."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import insert, select

from claybot.agents.records import DamagedRecord, NoteRecord, UserMessageRecord
from claybot.db.tables import job_records
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim, NewJob
from claybot.jobs.transcript import JobTranscript
from tests.jobs.conftest import Clock

UNKNOWN = {"type": "vote", "at": 2, "choice": "yes"}  # a newer engine's record


async def rows(db: JobDatabase, job_id: str) -> list[tuple[int, dict[str, Any]]]:
    async with db.tables.engine.connect() as connection:
        found = await connection.execute(
            select(job_records.c.seq, job_records.c.record)
            .where(job_records.c.job_id == job_id)
            .order_by(job_records.c.seq)
        )
        return [(row.seq, dict(row.record)) for row in found]


async def claimed(db: JobDatabase, worker: str) -> Claim:
    claim = await db.jobs.claim(worker)
    assert claim is not None
    return claim


async def test_a_row_holds_the_records_json_as_its_line_does(jobs_db: JobDatabase) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db, "w1")
    record = UserMessageRecord(at=1, messageId=job.id, text="naïve ✓")
    await jobs_db.jobs.append_records(claim, 0, [record])
    assert await rows(jobs_db, job.id) == [
        (0, {"type": "user_message", "at": 1, "messageId": job.id, "text": "naïve ✓", "files": []})
    ]
    assert await jobs_db.jobs.records(job.id) == [record]


async def test_a_row_of_no_known_type_keeps_its_number_and_is_not_read_as_a_record(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    await claimed(jobs_db, "dead")
    task = UserMessageRecord(at=1, messageId=job.id, text="Task: t")
    async with jobs_db.tables.engine.begin() as connection:
        await connection.execute(
            insert(job_records),
            [
                {"job_id": job.id, "seq": 0, "record": msgspec.to_builtins(task)},
                {"job_id": job.id, "seq": 1, "record": UNKNOWN},
            ],
        )
    [_, damaged] = await jobs_db.jobs.records(job.id)
    assert isinstance(damaged, DamagedRecord)
    assert damaged.line == 1 and msgspec.json.decode(damaged.raw) == UNKNOWN

    clock.advance(31)
    assert (await jobs_db.jobs.sweep()).requeued == [job.id]
    transcript = await JobTranscript.open(jobs_db, await claimed(jobs_db, "alive"))
    assert await transcript.read() == [task]  # the model never sees the unknown row
    late = NoteRecord(at=3, text="resumed")
    await transcript.append_durably(late)
    assert await rows(jobs_db, job.id) == [
        (0, msgspec.to_builtins(task)),
        (1, UNKNOWN),  # left as it was
        (2, msgspec.to_builtins(late)),  # numbered after it
    ]
