"""What every part of the job store shares: the engine, the clock, transactions that
publish their events once committed, and the fence every claimed write starts with.

Events (``job.created``, ``job.status``, ``job.log``) go to listeners in this
process after the commit; on PostgreSQL also with ``NOTIFY`` on ``claybot_jobs``
(which PostgreSQL delivers at commit), so workers on other machines wake at once
and the engine relays their progress onto its event stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from claybot.db.errors import wrap_database_errors
from claybot.db.tables import job_queue
from claybot.jobs.model import (
    EVERYONE,
    Claim,
    HitlMode,
    Job,
    JobNotFound,
    JobStatus,
    LeaseLost,
    Owner,
)

NOTIFY_CHANNEL = "claybot_jobs"
Clock = Callable[[], datetime]
Listener = Callable[[str, dict[str, Any]], None]
Events = list[tuple[str, dict[str, Any]]]


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    # SQLite hands datetimes back naive; they were written in UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def at(value: datetime) -> datetime:
    """A NOT NULL time column."""
    converted = aware(value)
    assert converted is not None
    return converted


def job_from_row(row: Any) -> Job:
    return Job(
        id=row.id,
        task=row.task,
        status=JobStatus(row.status),
        priority=row.priority,
        timeout_seconds=row.timeout_seconds,
        model=row.model,
        hitl_mode=HitlMode(row.hitl_mode),
        allow_network=bool(row.allow_network),
        worker_id=row.worker_id,
        attempt=row.attempt,
        retry_count=row.retry_count,
        max_retries=row.max_retries,
        api_key_id=row.api_key_id,
        created_at=at(row.created_at),
        updated_at=at(row.updated_at),
        started_at=aware(row.started_at),
        paused_at=aware(row.paused_at),
        completed_at=aware(row.completed_at),
        result=row.result,
        error_message=row.error_message,
        agent_question=row.agent_question,
        user_answer=row.user_answer,
        cancel_requested=bool(row.cancel_requested),
        tools_discovered=row.tools_discovered,
        execution_state=row.execution_state,
    )


P = ParamSpec("P")
R = TypeVar("R")


def completes_once_started(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """A write that, once begun, runs to its commit or rollback even if its caller is
    cancelled (a job being cancelled, a worker draining); the cancel is delivered after.

    Cancelled inside its transaction, a SQLite connection could be left holding the
    database's write lock until it is collected, and every other writer would wait
    for it (for the whole busy timeout).
    """

    @functools.wraps(method)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        task = asyncio.ensure_future(method(*args, **kwargs))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                with contextlib.suppress(Exception):
                    await task
            raise

    return run


class JobTables:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utcnow,
        lease: timedelta = timedelta(seconds=30),
        max_file_bytes: int = 10 * 1024 * 1024,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.lease = lease
        self.max_file_bytes = max_file_bytes
        self.postgres = engine.dialect.name == "postgresql"
        # Names this process in its NOTIFYs, so it can tell its own from others'.
        self.origin = uuid.uuid4().hex[:16]
        self._listeners: list[Listener] = []
        # SQLite has one writer at a time, and a connection that finds the database
        # locked sleeps in SQLite's busy handler (1 ms, 2, 5 ... up to 100 ms at a go)
        # while the lock may have been free for most of it. This process's writers
        # therefore take turns here, awaiting instead of sleeping; only other
        # processes' writers (a `claybot worker` on the same file) meet the busy handler.
        self._one_writer = contextlib.nullcontext() if self.postgres else asyncio.Lock()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Hear this process's committed changes; returns the unsubscribe call."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    # -- transactions and events ---------------------------------------------------

    @asynccontextmanager
    async def transaction(
        self, action: str
    ) -> AsyncIterator[tuple[AsyncConnection, list[tuple[str, dict[str, Any]]]]]:
        events: list[tuple[str, dict[str, Any]]] = []
        async with (
            self._one_writer,
            wrap_database_errors(action),
            self.engine.begin() as connection,
        ):
            yield connection, events
            if self.postgres:
                for kind, payload in events:
                    body = json.dumps(
                        {"origin": self.origin, "type": kind, "payload": payload}, default=str
                    )
                    await connection.execute(
                        text("SELECT pg_notify(:channel, :body)"),
                        {"channel": NOTIFY_CHANNEL, "body": body},
                    )
        for kind, payload in events:
            for listener in list(self._listeners):
                listener(kind, payload)

    async def fence(self, connection: AsyncConnection, claim: Claim, **values: Any) -> None:
        """The write that proves the claim still holds; extends the lease too."""
        now = self.clock()
        result = await connection.execute(
            update(job_queue)
            .where(
                job_queue.c.id == claim.job.id,
                job_queue.c.worker_id == claim.worker_id,
                job_queue.c.attempt == claim.attempt,
                job_queue.c.status == JobStatus.RUNNING.value,
            )
            .values(**{"updated_at": now, "lease_expires_at": now + self.lease, **values})
        )
        if result.rowcount != 1:
            raise LeaseLost(
                f"job {claim.job.id} is no longer held by {claim.worker_id} "
                f"(attempt {claim.attempt})"
            )

    async def locked(self, connection: AsyncConnection, job_id: str, owner: Owner) -> Job:
        query = select(job_queue).where(job_queue.c.id == job_id)
        if self.postgres:
            query = query.with_for_update()
        row = (await connection.execute(query)).first()
        if row is None or (owner is not EVERYONE and row.api_key_id != owner):
            raise JobNotFound(job_id)
        return job_from_row(row)
