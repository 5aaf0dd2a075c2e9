"""The job database's files on SQLite and PostgreSQL: artifacts and uploads, which
``JobFiles`` keeps and the in-memory twin has not. What the job store promises on
every implementation (claims, leases, fences, statuses, records, logs, events) is in
``tests/jobs/contract/``."""

from __future__ import annotations

import pytest

from claybot.db.sql_keys import SqlApiKeyStore
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim, JobNotFound, LeaseLost, NewJob
from claybot.kernel.errors import InvalidInput, NotFound
from tests.jobs.conftest import Clock


async def key_id(db: JobDatabase, name: str = "k") -> str:
    record, _ = await SqlApiKeyStore(db.tables.engine).create(name, ["jobs:read", "jobs:write"])
    return record.id


async def claimed(db: JobDatabase, worker: str = "w1") -> Claim:
    claim = await db.jobs.claim(worker)
    assert claim is not None
    return claim


async def test_a_lost_lease_refuses_the_old_workers_artifact(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    first = await claimed(jobs_db, "dead")
    clock.advance(31)  # its heartbeat stopped: the lease ran out
    assert (await jobs_db.jobs.sweep()).requeued == [job.id]
    await claimed(jobs_db, "alive")
    with pytest.raises(LeaseLost):
        await jobs_db.files.put_artifact(first, "late.txt", b"x", "text/plain")
    assert await jobs_db.files.artifacts(job.id) == []


async def test_an_artifact_written_again_is_replaced(jobs_db: JobDatabase) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    first = await jobs_db.files.put_artifact(claim, "out.txt", b"one", "text/plain")
    second = await jobs_db.files.put_artifact(claim, "out.txt", b"two!", "text/plain")
    assert first.id == second.id
    listed = await jobs_db.files.artifacts(job.id)
    assert [(a.filename, a.size_bytes) for a in listed] == [("out.txt", 4)]
    assert (await jobs_db.files.artifact(job.id, first.id)).content == b"two!"
    with pytest.raises(NotFound):
        await jobs_db.files.artifact(job.id, "nope")
    with pytest.raises(InvalidInput) as too_big:
        await jobs_db.files.put_artifact(claim, "big.bin", b"x" * 1001, None)
    assert too_big.value.code == "FILE_TOO_LARGE"


async def test_uploads_attach_only_to_the_uploaders_own_jobs(jobs_db: JobDatabase) -> None:
    mine, theirs = await key_id(jobs_db, "mine"), await key_id(jobs_db, "theirs")
    their_job = await jobs_db.jobs.create(NewJob("theirs", api_key_id=theirs))
    with pytest.raises(JobNotFound):
        await jobs_db.files.add_attachment(
            "x.txt", b"x", "text/plain", owner=mine, viewer=mine, job_id=their_job.id
        )
    assert await jobs_db.files.attachments(their_job.id) == []
    loose = await jobs_db.files.add_attachment(
        "data.csv", b"a,b", "text/csv", owner=mine, viewer=mine
    )
    # Someone else's job cannot take my upload either.
    with pytest.raises(NotFound):
        await jobs_db.jobs.create(NewJob("steal", api_key_id=theirs, attachment_ids=(loose.id,)))
    job = await jobs_db.jobs.create(NewJob("use it", api_key_id=mine, attachment_ids=(loose.id,)))
    files = await jobs_db.files.attachments(job.id, content=True)
    assert [(f.filename, f.content) for f in files] == [("data.csv", b"a,b")]
    await jobs_db.jobs.cancel(their_job.id)
    claim = await claimed(jobs_db)  # a claim carries the names of its job's uploads
    assert (claim.job.id, claim.attachments) == (job.id, ("data.csv",))
