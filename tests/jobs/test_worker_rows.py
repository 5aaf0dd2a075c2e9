"""The workers table on SQLite and PostgreSQL: a worker silent for a lease is dead, one
that said it stopped is stopped (never dead), and rows of workers long gone age out.
Time is the clock the test moves (the lease is 30 s: tests/jobs/conftest.py)."""

from __future__ import annotations

from typing import get_args

from sqlalchemy import func, select

from claybot.db.tables import WORKER_STATUSES, workers
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import WorkerStatus
from claybot.jobs.worker_rows import DEAD_KEPT, STOPPED_KEPT
from tests.jobs.conftest import Clock


async def beat(db: JobDatabase, worker_id: str, status: WorkerStatus = "active") -> None:
    await db.workers.heartbeat(
        worker_id, hostname="host", pid=1, version="1", active_jobs=1, status=status
    )


async def statuses(db: JobDatabase, status: WorkerStatus | None = None) -> dict[str, str]:
    return {row.id: row.status for row in await db.workers.listing(status)}


async def stored(db: JobDatabase) -> dict[str, str]:
    """What the table holds, listing's reading aside."""
    async with db.tables.engine.connect() as connection:
        rows = (await connection.execute(select(workers.c.id, workers.c.status))).all()
    return {row.id: row.status for row in rows}


def test_the_statuses_are_the_tables() -> None:
    assert get_args(WorkerStatus) == WORKER_STATUSES


async def test_a_worker_silent_for_a_lease_is_dead_before_and_after_the_sweep(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    await beat(jobs_db, "lost")
    clock.advance(10)
    await beat(jobs_db, "alive")
    clock.advance(25)  # "lost" silent for 35 s, past its 30 s lease; "alive" for 25 s
    await beat(jobs_db, "alive")
    # Listed dead at once: no worker may be left to sweep.
    assert await statuses(jobs_db) == {"lost": "dead", "alive": "active"}
    assert await statuses(jobs_db, "dead") == {"lost": "dead"}
    assert (await jobs_db.workers.listing("dead"))[0].active_jobs == 0
    assert await stored(jobs_db) == {"lost": "active", "alive": "active"}
    swept = await jobs_db.workers.sweep()
    assert (swept.dead, swept.removed) == (1, 0)
    assert await stored(jobs_db) == {"lost": "dead", "alive": "active"}
    assert (await jobs_db.workers.sweep()).dead == 0  # once
    await beat(jobs_db, "lost")  # it was only paused: heard again, active again
    assert await statuses(jobs_db) == {"lost": "active", "alive": "active"}


async def test_a_worker_that_said_it_stopped_is_stopped_never_dead(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    await beat(jobs_db, "w")
    await beat(jobs_db, "w", "stopped")
    clock.advance(600)  # silent ever since, as a stopped worker is
    assert (await jobs_db.workers.sweep()).dead == 0
    assert await statuses(jobs_db) == {"w": "stopped"}
    assert await stored(jobs_db) == {"w": "stopped"}


async def test_stopped_rows_age_out_after_an_hour_and_dead_ones_after_a_day(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    await beat(jobs_db, "stopped")
    await beat(jobs_db, "stopped", "stopped")
    await beat(jobs_db, "dead")
    clock.advance(31)
    assert (await jobs_db.workers.sweep()).dead == 1
    await beat(jobs_db, "silent")  # lost next, and never swept (no worker left to sweep)
    clock.advance(31)
    assert await stored(jobs_db) == {"stopped": "stopped", "dead": "dead", "silent": "active"}
    assert await statuses(jobs_db) == {"stopped": "stopped", "dead": "dead", "silent": "dead"}

    clock.advance(STOPPED_KEPT.total_seconds() - 62)  # the stopped one's hour is up
    assert set(await statuses(jobs_db)) == {"stopped", "dead", "silent"}
    clock.advance(1)
    assert set(await statuses(jobs_db)) == {"dead", "silent"}  # left out at once
    assert set(await stored(jobs_db)) == {"stopped", "dead", "silent"}
    assert (await jobs_db.workers.sweep()).removed == 1  # and deleted by the next sweep
    assert set(await stored(jobs_db)) == {"dead", "silent"}

    clock.advance((DEAD_KEPT - STOPPED_KEPT).total_seconds())  # the dead one's day is up
    assert await statuses(jobs_db) == {"silent": "dead"}  # heard 31 s after it
    clock.advance(31)
    assert await statuses(jobs_db) == {}
    assert (await jobs_db.workers.sweep()).removed == 2
    async with jobs_db.tables.engine.connect() as connection:
        assert (await connection.execute(select(func.count()).select_from(workers))).scalar() == 0
