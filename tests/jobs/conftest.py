"""A job database on each backend, with a clock the test moves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from claybot.jobs.database import JobDatabase
from tests.databases import BACKENDS, open_database, url_for


@dataclass
class Clock:
    now: datetime = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
async def jobs_db(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[JobDatabase]:
    async for engine in open_database(url_for(request.param, request, tmp_path)):
        db = JobDatabase(engine, clock=clock, lease=timedelta(seconds=30), max_file_bytes=1000)
        yield db
        await db.close()
