"""One job store contract, every implementation: the in-memory twin, SQLite and
PostgreSQL each run every test of this folder (the ``store`` fixture), as
procrastinate runs one suite against its connector and its ``InMemoryConnector``."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

from claybot.agents.records import NoteRecord, UserMessageRecord
from claybot.db.sql_keys import SqlApiKeyStore
from claybot.jobs.database import JobDatabase
from claybot.jobs.memory_store import MemoryJobStore
from claybot.jobs.model import Claim, StoredFile
from claybot.jobs.port import JobEvents, JobLogStore, JobStore
from tests.databases import open_database, url_for
from tests.jobs.conftest import Clock

LEASE = timedelta(seconds=30)


def note(text: str) -> NoteRecord:
    """A record to checkpoint: the stores take the agents' typed records."""
    return NoteRecord(at=0, text=text)


def user_message(text: str) -> UserMessageRecord:
    return UserMessageRecord(at=0, messageId="m1", text=text)


@dataclass(frozen=True)
class Store:
    """A job store behind its ports, and what a test needs around it."""

    jobs: JobStore
    logs: JobLogStore
    events: JobEvents
    # The artifacts a job's checkpoints stored (``JobFiles.artifacts`` on SQL).
    artifacts: Callable[[str], Awaitable[list[StoredFile]]]
    # A new key id that may own jobs (on SQL a row of api_keys: jobs refer to it).
    new_owner: Callable[[str], Awaitable[str]]

    async def claimed(self, worker: str = "w1") -> Claim:
        claim = await self.jobs.claim(worker)
        assert claim is not None
        return claim


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[Store]:
    if request.param == "memory":
        memory = MemoryJobStore(clock=clock, lease=LEASE)

        async def memory_artifacts(job_id: str) -> list[StoredFile]:
            return memory.artifacts(job_id)

        async def any_owner(name: str) -> str:
            return f"{name}-{secrets.token_hex(4)}"

        yield Store(memory, memory.logs, memory, memory_artifacts, any_owner)
        return
    async for engine in open_database(url_for(request.param, request, tmp_path)):
        db = JobDatabase(engine, clock=clock, lease=LEASE)
        owner = partial(_key_owner, SqlApiKeyStore(engine))
        yield Store(db.jobs, db.logs, db.tables, db.files.artifacts, owner)
        await db.close()


async def _key_owner(keys: SqlApiKeyStore, name: str) -> str:
    record, _ = await keys.create(name, ["jobs:read", "jobs:write"])
    return record.id
