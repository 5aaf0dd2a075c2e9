"""On PostgreSQL the fence, a job's every write after its claim, finds the job's row by
its primary key, in the plan made for its first runs and in the one PostgreSQL keeps
for the prepared statement. Compared column by column, the planner could take an
index on ``status`` or ``worker_id`` instead (every index costs the same while the
table is small), and the plan it kept then walked every row ever running, dead ones
too: 0.8 ms a fence after 15,000 jobs instead of 0.2."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect

from claybot.jobs.database import JobDatabase
from claybot.jobs.model import NewJob
from claybot.jobs.sql import fence_update
from tests.databases import open_database


@pytest.fixture
async def postgres_jobs(postgres_url: str) -> AsyncIterator[JobDatabase]:
    async for engine in open_database(postgres_url):
        db = JobDatabase(engine, lease=timedelta(seconds=30))
        yield db
        await db.close()


@pytest.fixture
def connection(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    plain = postgres_url.replace("postgresql+asyncpg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as connection:
        yield connection


def index_scans(plan: dict[str, Any]) -> list[str]:
    found = [plan["Index Name"]] if "Index Name" in plan else []
    for child in plan.get("Plans", []):
        found += index_scans(child)
    return found


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
async def test_the_fence_finds_the_job_by_its_primary_key(
    postgres_jobs: JobDatabase, connection: psycopg.Connection[Any], plan_cache_mode: str
) -> None:
    for n in range(6):
        await postgres_jobs.jobs.create(NewJob(f"t{n}"))
    claims = await postgres_jobs.jobs.claim_many("w1", 4)
    claim = claims[0]
    # $1, $2, ... placeholders (asyncpg's style), for PREPARE.
    compiled = fence_update(frozenset()).compile(dialect=asyncpg_dialect.dialect())
    now = datetime.now(UTC)
    values = {
        **compiled.params,
        "f_now": now,
        "f_lease": now + timedelta(seconds=30),
        "f_id": claim.job.id,
        "f_worker": claim.worker_id,
        "f_attempt": claim.attempt,
    }
    assert compiled.positiontup is not None
    arguments = sql.SQL(", ").join(sql.Literal(values[name]) for name in compiled.positiontup)
    connection.execute(f"SET plan_cache_mode = {plan_cache_mode}")
    connection.execute(f"PREPARE fence AS {compiled.string}")
    try:
        explained = connection.execute(
            sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE fence({})").format(arguments)
        ).fetchone()
    finally:
        connection.execute("DEALLOCATE fence")
    assert explained is not None
    plan = explained[0] if isinstance(explained[0], list) else json.loads(explained[0])
    assert index_scans(plan[0]["Plan"]) == ["pk_job_queue"]
