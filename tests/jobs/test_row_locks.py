"""On PostgreSQL job writes run in several connections at once (the writer's lanes, and
every `claybot worker` process's): writes over many job rows (a worker's renewal, the
sweep) must not wait on rows another connection is writing, or two end up waiting on
each other (``deadlock detected``). A process writes through one lane by default; here
it has four, to stand for four processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from claybot.agents.records import NoteRecord
from claybot.db.tables import job_queue
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim, NewJob
from claybot.jobs.port import Renewal
from tests.databases import open_database
from tests.jobs.conftest import Clock

JOBS = 48
ROUNDS = 6
RENEWALS_PER_ROUND = 4


@pytest.fixture
async def postgres_jobs(
    postgres_url: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[JobDatabase]:
    monkeypatch.setattr("claybot.jobs.sql.POSTGRES_WRITE_LANES", 4)
    async for engine in open_database(postgres_url):
        db = JobDatabase(engine, clock=clock, lease=timedelta(seconds=30))
        yield db
        await db.close()


async def claimed_jobs(db: JobDatabase, count: int, worker: str = "w1") -> list[Claim]:
    await asyncio.gather(*(db.jobs.create(NewJob(f"t{n}")) for n in range(count)))
    claims = await db.jobs.claim_many(worker, count)
    assert len(claims) == count
    return claims


async def test_fences_and_renewals_in_many_lanes_neither_fail_nor_lose_a_lease(
    postgres_jobs: JobDatabase,
) -> None:
    """A worker's heartbeat renews all its jobs while they checkpoint and log: the
    renewal's rows are the checkpoints' rows, written in the other lanes."""
    db = postgres_jobs
    claims = await claimed_jobs(db, JOBS)
    ids = [claim.job.id for claim in claims]
    renew_every = JOBS // RENEWALS_PER_ROUND
    for round_ in range(ROUNDS):
        writes: list[Any] = []
        for n, claim in enumerate(claims):
            note = NoteRecord(at=round_, text=f"round {round_}")
            writes.append(db.jobs.append_records(claim, round_, [note]))
            writes.append(db.logs.add(claim.job.id, f"round {round_}", claim=claim))
            if n % renew_every == renew_every // 2:
                writes.append(db.jobs.renew("w1", ids))
        async with asyncio.timeout(30):
            results = await asyncio.gather(*writes, return_exceptions=True)
        failed = [result for result in results if isinstance(result, BaseException)]
        assert failed == [], f"round {round_}: {failed[:3]}"
        lost = {
            job_id for result in results if isinstance(result, Renewal) for job_id in result.lost
        }
        assert lost == set(), f"round {round_}: leases reported lost"
    # None of it needed the writer's second try: the rows were never taken in a cycle.
    assert db.tables.writer.retries == 0


async def test_a_renewal_skips_a_row_being_written_and_still_counts_it_held(
    postgres_jobs: JobDatabase, clock: Clock
) -> None:
    db = postgres_jobs
    claims = await claimed_jobs(db, 3)
    busy, *others = [claim.job.id for claim in claims]
    await db.jobs.cancel(busy)  # a running job: asked to stop
    clock.advance(10)
    async with db.tables.engine.connect() as other_lane:
        # Another lane's transaction holds the row (a fence in flight, say).
        await other_lane.execute(select(job_queue).where(job_queue.c.id == busy).with_for_update())
        renewing = asyncio.create_task(db.jobs.renew("w1", [busy, *others]))
        # Had it waited for the row, it would end only after the rollback below.
        done, _ = await asyncio.wait([renewing], timeout=15)
        await other_lane.rollback()
    assert done, "the renewal waited for the locked row"
    renewal = renewing.result()
    assert renewal.lost == set()
    assert renewal.cancelled == {busy}  # read from the row, though it was not renewed
    async with db.tables.engine.connect() as connection:
        rows = await connection.execute(select(job_queue.c.id, job_queue.c.lease_expires_at))
        leases = {row.id: row.lease_expires_at for row in rows}
    assert all(leases[job_id] == clock.now + timedelta(seconds=30) for job_id in others)
    assert leases[busy] == clock.now - timedelta(seconds=10) + timedelta(seconds=30)


async def test_a_renewal_reports_lost_what_the_worker_no_longer_holds(
    postgres_jobs: JobDatabase,
) -> None:
    db = postgres_jobs
    claims = await claimed_jobs(db, 2)
    mine, taken = [claim.job.id for claim in claims]
    async with db.tables.engine.begin() as connection:
        await connection.execute(
            update(job_queue).where(job_queue.c.id == taken).values(worker_id="w2")
        )
    renewal = await db.jobs.renew("w1", [mine, taken])
    assert (renewal.lost, renewal.cancelled) == ({taken}, set())


async def test_a_sweep_leaves_a_row_being_written_for_the_next_sweep(
    postgres_jobs: JobDatabase, clock: Clock
) -> None:
    db = postgres_jobs
    claims = await claimed_jobs(db, 2)
    busy, idle = [claim.job.id for claim in claims]
    clock.advance(31)  # both leases ran out
    async with db.tables.engine.connect() as other_lane:
        await other_lane.execute(select(job_queue).where(job_queue.c.id == busy).with_for_update())
        sweeping = asyncio.create_task(db.jobs.sweep())
        done, _ = await asyncio.wait([sweeping], timeout=15)
        await other_lane.rollback()
    assert done, "the sweep waited for the locked row"
    assert sweeping.result().requeued == [idle]
    assert (await db.jobs.sweep()).requeued == [busy]
