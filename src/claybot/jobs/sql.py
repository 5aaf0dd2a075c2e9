"""What every part of the job store shares: the engine (reads), the writer (writes,
grouped into shared transactions: ``writer.py``), the clock, events published once
committed, and the fence every claimed write starts with.

Events (``job.created``, ``job.status``, ``job.log``) go to listeners in this
process after the commit; on PostgreSQL also with ``NOTIFY`` on ``claybot_jobs``
(which PostgreSQL delivers at commit), so workers on other machines wake at once
and the engine relays their progress onto its event stream.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from psycopg import sql as psycopg_sql
from sqlalchemy import Connection, Update, bindparam, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncEngine

from claybot.db.database import create_sync_engine
from claybot.db.driver_statement import DriverStatement, execute_script
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
from claybot.jobs.writer import Events, JobWriter, Write

NOTIFY_CHANNEL = "claybot_jobs"
# Connections a process writes jobs through on PostgreSQL (SQLite has one writer). One:
# with a batch's statements pipelined, one lane's batches grow with the load (about
# twelve writes each at 16 workers) and cost two round trips each; four lanes split the
# same writes into four times the batches, commits and thread switches (November 28,
# 16 workers: 1 lane 760-865 jobs/s, 4 lanes 508-685, at 60 % more CPU a job).
POSTGRES_WRITE_LANES = 1
Clock = Callable[[], datetime]
Listener = Callable[[str, dict[str, Any]], None]


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


T = TypeVar("T")


class JobTables:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utcnow,
        lease: timedelta = timedelta(seconds=30),
        max_file_bytes: int = 10 * 1024 * 1024,
    ) -> None:
        self.engine = engine  # reads, on the event loop
        self.clock = clock
        self.lease = lease
        self.max_file_bytes = max_file_bytes
        self.postgres = engine.dialect.name == "postgresql"
        # Names this process in its NOTIFYs, so it can tell its own from others'.
        self.origin = uuid.uuid4().hex[:16]
        self._listeners: list[Listener] = []
        # Writes, grouped into shared transactions on a thread of their own.
        self.writer = (
            JobWriter(
                create_sync_engine(engine),
                self._notify_and_commit,
                lanes=POSTGRES_WRITE_LANES,
                pipeline=True,
            )
            if self.postgres
            else JobWriter(create_sync_engine(engine))
        )

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Hear this process's committed changes; returns the unsubscribe call."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def close(self) -> None:
        await self.writer.close()

    # -- writes and events ---------------------------------------------------------

    async def write(
        self,
        action: str,
        write: Write[T],
        *,
        job_id: str | None = None,
        skips_locked: bool = False,
    ) -> T:
        """Run ``write(connection, events)`` in the writer's next transaction; its
        result once committed. The events it appended go to listeners after the commit
        (and, on PostgreSQL, to other processes with NOTIFY, in the same transaction).

        ``job_id``: the one job whose rows the write changes (every such write goes to
        that job's lane); ``skips_locked``: it takes many jobs' rows with ``SKIP
        LOCKED``. A write over several jobs that does neither may close a lock cycle
        with another lane on PostgreSQL (``writer.py`` then runs it again, once PostgreSQL
        has found the cycle: a second later by default)."""
        return await self.writer.write(
            action, write, self._publish, lane_key=job_id, skips_locked=skips_locked
        )

    def _publish(self, events: Events) -> None:
        for kind, payload in events:
            for listener in list(self._listeners):
                listener(kind, payload)

    def _notify_and_commit(self, connection: Connection, events: Events) -> None:
        """The batch's events to other processes, as few NOTIFYs as fit them (a
        payload must stay under 8,000 bytes), and the COMMIT, in one round trip: a
        statement is a round trip on PostgreSQL, and a batch is often a single write."""
        notifies = [
            psycopg_sql.SQL("SELECT pg_notify({}, {})").format(
                psycopg_sql.Literal(NOTIFY_CHANNEL), psycopg_sql.Literal(body)
            )
            for body in notify_bodies(self.origin, events)
        ]
        execute_script(connection, psycopg_sql.SQL("; ").join([*notifies, COMMIT]))

    def fence(self, connection: Connection, claim: Claim, **values: Any) -> None:
        """The write that proves the claim still holds; extends the lease too."""
        now = self.clock()
        parameters = {f"v_{name}": value for name, value in values.items()}
        ran = fence_statement(frozenset(values)).execute(
            connection,
            {
                "f_id": claim.job.id,
                "f_worker": claim.worker_id,
                "f_attempt": claim.attempt,
                "f_now": now,
                "f_lease": now + self.lease,
                **parameters,
            },
        )
        if ran.rowcount != 1:
            raise lease_lost(claim)

    def reread(self, connection: Connection, job_id: str) -> Job:
        """The job as this write left it."""
        return job_from_row(connection.execute(JOB_BY_ID, {"id": job_id}).one())

    def locked(self, connection: Connection, job_id: str, owner: Owner) -> Job:
        query = select(job_queue).where(job_queue.c.id == job_id)
        if self.postgres:
            query = query.with_for_update()
        row = connection.execute(query).first()
        if row is None or (owner is not EVERYONE and row.api_key_id != owner):
            raise JobNotFound(job_id)
        return job_from_row(row)


@functools.cache
def fence_statement(names: frozenset[str]) -> DriverStatement:
    """The fence setting ``names``, built once: a statement built for each write cost
    100 us to execute here, a built one 15, one on the driver's cursor 5."""
    return DriverStatement(fence_update(names))


def fence_update(names: frozenset[str]) -> Update:
    """The UPDATE of the claimed job's row (``f_id``, held by ``f_worker`` under
    ``f_attempt``, running) that sets ``names`` (from ``v_<name>``) besides the lease
    (``f_lease``) and ``updated_at`` (``f_now``)."""
    values: dict[str, Any] = {
        "updated_at": bindparam("f_now"),
        "lease_expires_at": bindparam("f_lease"),
    }
    values.update({name: bindparam(f"v_{name}") for name in names})
    held = (job_queue.c.worker_id, job_queue.c.attempt, job_queue.c.status)
    return (
        update(job_queue)
        .where(
            job_queue.c.id == bindparam("f_id"),
            # One row compared, not three columns: IS NOT DISTINCT FROM no index serves,
            # so the primary key is PostgreSQL's one way to the row. Column by column, the
            # plan it kept (made while the table was small, every index costing the same)
            # walked ix_job_queue_claim's 'running' entries, every job ever claimed, dead
            # ones too: 200 buffers and 0.8 ms a fence after 15,000 jobs.
            tuple_(*held).is_not_distinct_from(
                tuple_(bindparam("f_worker"), bindparam("f_attempt"), JobStatus.RUNNING.value)
            ),
        )
        .values(**values)
    )


def lease_lost(claim: Claim) -> LeaseLost:
    return LeaseLost(
        f"job {claim.job.id} is no longer held by {claim.worker_id} (attempt {claim.attempt})"
    )


JOB_BY_ID = select(job_queue).where(job_queue.c.id == bindparam("id"))
COMMIT = psycopg_sql.SQL("COMMIT")
NOTIFY_PAYLOAD_BYTES = 7_000  # PostgreSQL refuses 8,000 and more


NOTIFY_SHORT_TEXT = 500  # characters an event's long text keeps when it does not fit


def notify_bodies(origin: str, events: Events) -> list[str]:
    """``{"origin", "events": [{"type", "payload"}, ...]}`` messages, each under the
    payload limit; an event that cannot fit alone is told shortened (``_fitting``)."""
    bodies: list[str] = []
    batch: list[str] = []
    size = 0
    for kind, payload in events:
        item = _fitting(kind, payload)
        if batch and size + len(item) > NOTIFY_PAYLOAD_BYTES:
            bodies.append(_message(origin, batch))
            batch, size = [], 0
        batch.append(item)
        size += len(item) + 1
    if batch:
        bodies.append(_message(origin, batch))
    return bodies


def _fitting(kind: str, payload: dict[str, Any]) -> str:
    """The event as JSON (ASCII: its length is its size in bytes). One too large for a
    NOTIFY would make PostgreSQL refuse the batch's commit (a log line of 9,000
    characters did), so other processes hear it with its long texts cut and
    ``"truncated": true``, or, should that still not fit, with its job's id alone; the
    whole of it is in the database (``GET /api/v1/jobs/{id}/logs``)."""
    item = json.dumps({"type": kind, "payload": payload}, default=str)
    if len(item) <= NOTIFY_PAYLOAD_BYTES:
        return item
    shortened: dict[str, Any] = {
        key: value[:NOTIFY_SHORT_TEXT] + "…"
        if isinstance(value, str) and len(value) > NOTIFY_SHORT_TEXT
        else value
        for key, value in payload.items()
    }
    item = json.dumps({"type": kind, "payload": {**shortened, "truncated": True}}, default=str)
    if len(item) <= NOTIFY_PAYLOAD_BYTES:
        return item
    bare = {"jobId": payload.get("jobId"), "truncated": True}
    return json.dumps({"type": kind, "payload": bare}, default=str)


def notify_prefix(origin: str) -> str:
    """How every NOTIFY of ``origin`` begins."""
    return f'{{"origin": {json.dumps(origin)}, '


def _message(origin: str, items: list[str]) -> str:
    return f'{notify_prefix(origin)}"events": [{",".join(items)}]}}'
