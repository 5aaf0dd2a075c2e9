"""Jobs and their claims (seed 002's ``job_queue`` and ``job_records``).

Two rules carry the durability of jobs:

- **Claims are leases.** A worker claims the top queued job (priority, then age)
  in one statement: ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so workers never wait
  on each other's rows; SQLite has a single writer, so the same statement is atomic
  there. The claim bumps ``attempt`` and sets ``lease_expires_at``; the worker's
  heartbeat extends it. ``sweep`` requeues the jobs whose lease ran out (their
  worker died) and fails those that have used their retries.
- **Every write after the claim is fenced** by (worker_id, attempt, running): it
  starts with an UPDATE of the job's row that must match exactly one row, in the
  same transaction as the write itself (``JobTables.fence``). A worker that lost its
  lease (swept, cancelled, claimed again elsewhere) gets ``LeaseLost`` and nothing
  is written.

It is longer than most modules because the claim, the fence and every transition
that needs one are one protocol over one row: reading them together is how one
checks that no write escapes the fence. Logs, files and workers, which need no
status transitions, live beside it.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from types import SimpleNamespace
from typing import Any, TypeVar

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Update,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by

from claybot.db.driver_statement import DriverStatement, Sent
from claybot.db.errors import wrap_database_errors
from claybot.db.tables import job_attachments, job_logs, job_queue, job_records
from claybot.jobs.fenced import NO_CHECKPOINT, Checkpoint, NewArtifact, write_fenced
from claybot.jobs.logs import add_log
from claybot.jobs.model import (
    EVERYONE,
    Claim,
    HitlMode,
    InvalidJobState,
    Job,
    JobNotFound,
    JobStatus,
    NewJob,
    Owner,
    check_transition,
)
from claybot.jobs.sql import JobTables, job_from_row
from claybot.jobs.writer import Events, TwoStep
from claybot.kernel.errors import NotFound
from claybot.kernel.event_types import EventType

T = TypeVar("T")


@dataclass(frozen=True)
class Renewal:
    cancelled: set[str]  # asked to stop: end them cancelled
    lost: set[str]  # no longer this worker's: write nothing more


@dataclass(frozen=True)
class Swept:
    requeued: list[str]
    failed: list[str]
    cancelled: list[str]


class JobStore:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

    # -- jobs -------------------------------------------------------------------------

    async def create(self, new: NewJob) -> Job:
        now = self._db.clock()
        job_id = str(uuid.uuid4())
        values = {
            "id": job_id,
            "task": new.task,
            "priority": new.priority,
            "timeout_seconds": new.timeout_seconds,
            "model": new.model,
            "hitl_mode": new.hitl_mode.value,
            "allow_network": new.allow_network,
            "max_retries": new.max_retries,
            "api_key_id": new.api_key_id,
            "created_at": now,
            "updated_at": now,
        }
        created = (EventType.JOB_CREATED, {"jobId": job_id, "status": "queued"})
        if self._db.postgres and not new.attachment_ids:
            # The usual case there: one statement, pipelined with the batch's others.
            def receive(connection: Connection, sent: Sent, events: Events) -> Job:
                events.append(created)
                ran = sent.ran()
                return job_from_row(
                    SimpleNamespace(**dict(zip(ran.columns, ran.first, strict=True)))
                )

            return await self._db.write(
                "creating a job",
                TwoStep(partial(CREATE_ON_POSTGRES.send, parameters=values), receive),
                job_id=job_id,
            )

        def write(connection: Connection, events: Events) -> Job:
            if self._db.postgres:
                job = job_from_row(connection.execute(create_statement(), values).one())
            else:
                CREATE_ON_SQLITE.execute(connection, values)
                job = queued_job(values)
            if new.attachment_ids:
                attached = connection.execute(
                    update(job_attachments)
                    .where(
                        job_attachments.c.id.in_(new.attachment_ids),
                        job_attachments.c.job_id.is_(None),
                        _same_owner(job_attachments.c.api_key_id, new.api_key_id),
                    )
                    .values(job_id=job_id)
                )
                if attached.rowcount != len(set(new.attachment_ids)):
                    raise NotFound(
                        "an attachment is unknown, not yours, or attached to another job",
                        field="attachments",
                    )
            if not self._db.postgres:  # there the job's statement wrote it
                FIRST_LOG_ON_SQLITE.execute(
                    connection, FIRST_LOG | {"job_id": job_id, "timestamp": now}
                )
            events.append(created)
            return job

        return await self._db.write("creating a job", write, job_id=job_id)

    async def get(self, job_id: str, owner: Owner = EVERYONE) -> Job:
        async with wrap_database_errors("reading a job"), self._db.engine.connect() as connection:
            row = (
                await connection.execute(select(job_queue).where(job_queue.c.id == job_id))
            ).first()
        if row is None or (owner is not EVERYONE and row.api_key_id != owner):
            raise JobNotFound(job_id)  # another key's job is as unknown as a missing one
        return job_from_row(row)

    async def page(
        self,
        owner: Owner = EVERYONE,
        *,
        status: JobStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[Job], int]:
        conditions = []
        if owner is not EVERYONE:
            conditions.append(job_queue.c.api_key_id == owner)
        if status is not None:
            conditions.append(job_queue.c.status == status.value)
        where = and_(true(), *conditions)
        async with wrap_database_errors("listing jobs"), self._db.engine.connect() as connection:
            rows = (
                await connection.execute(
                    select(job_queue)
                    .where(where)
                    .order_by(job_queue.c.created_at.desc(), job_queue.c.id.desc())
                    .limit(limit)
                    .offset(offset)
                )
            ).all()
            count = (
                await connection.execute(select(func.count()).select_from(job_queue).where(where))
            ).scalar_one()
        return [job_from_row(row) for row in rows], int(count)

    async def respond(self, job_id: str, answer: str, owner: Owner = EVERYONE) -> Job:
        """A person answered the job's question: it is queued again with the answer."""
        now = self._db.clock()

        def write(connection: Connection, events: Events) -> Job:
            job = self._db.locked(connection, job_id, owner)
            check_transition(job.status, JobStatus.QUEUED)
            if job.status is not JobStatus.WAITING_FOR_USER:
                raise InvalidJobState(f"job {job_id} is {job.status.value}, not waiting_for_user")
            connection.execute(
                update(job_queue)
                .where(job_queue.c.id == job_id)
                .values(
                    status=JobStatus.QUEUED.value,
                    user_answer=answer,
                    agent_question=None,
                    paused_at=None,
                    updated_at=now,
                )
            )
            events.append((EventType.JOB_STATUS, {"jobId": job_id, "status": "queued"}))
            return self._db.reread(connection, job_id)

        # As the write left it: a worker may claim it the moment it commits.
        return await self._db.write("answering a job", write, job_id=job_id)

    async def cancel(self, job_id: str, owner: Owner = EVERYONE) -> Job:
        """Cancel a queued or waiting job at once; a running one is asked to stop (its
        worker sees the request at its next heartbeat and ends the job ``cancelled``)."""
        now = self._db.clock()

        def write(connection: Connection, events: Events) -> Job:
            job = self._db.locked(connection, job_id, owner)
            check_transition(job.status, JobStatus.CANCELLED)
            if job.status is JobStatus.RUNNING:
                connection.execute(
                    update(job_queue)
                    .where(job_queue.c.id == job_id)
                    .values(cancel_requested=True, updated_at=now)
                )
                events.append((EventType.JOB_CANCEL_REQUESTED, {"jobId": job_id}))
            else:
                connection.execute(
                    update(job_queue)
                    .where(job_queue.c.id == job_id)
                    .values(
                        status=JobStatus.CANCELLED.value,
                        completed_at=now,
                        agent_question=None,
                        updated_at=now,
                    )
                )
                events.append((EventType.JOB_STATUS, {"jobId": job_id, "status": "cancelled"}))
            return self._db.reread(connection, job_id)

        return await self._db.write("cancelling a job", write, job_id=job_id)

    # -- claiming -------------------------------------------------------------------

    async def claim(self, worker_id: str) -> Claim | None:
        """The top queued job, now running under this worker; None when none is queued."""
        claims = await self.claim_many(worker_id, 1)
        return claims[0] if claims else None

    async def claim_many(self, worker_id: str, limit: int) -> list[Claim]:
        """Up to ``limit`` of the top queued jobs (priority, then age), now running under
        this worker, in that order; one statement whatever ``limit`` is."""
        now = self._db.clock()
        statement = claim_statement(limit, self._db.postgres)

        def write(connection: Connection, events: Events) -> list[Claim]:
            rows = connection.execute(
                statement,
                {"worker_id": worker_id, "now": now, "lease_expires_at": now + self._db.lease},
            ).all()
            jobs = sorted(
                (job_from_row(row) for row in rows),
                key=lambda job: (-job.priority, job.created_at, job.id),
            )
            uploads: dict[str, list[str]] = {}
            if self._db.postgres:  # the claim's rows carry them
                uploads = {row.id: row.uploads for row in rows if row.uploads}
            elif jobs:
                for upload in connection.execute(UPLOADS_OF, {"ids": [job.id for job in jobs]}):
                    uploads.setdefault(upload.job_id, []).append(upload.filename)
            for job in jobs:
                events.append((EventType.JOB_STATUS, {"jobId": job.id, "status": "running"}))
            return [
                Claim(job, worker_id, job.attempt, tuple(uploads.get(job.id, ()))) for job in jobs
            ]

        return await self._db.write("claiming jobs", write, skips_locked=self._db.postgres)

    async def renew(self, worker_id: str, job_ids: Sequence[str]) -> Renewal:
        """Extend this worker's leases; which of its jobs were asked to cancel, and which
        it no longer holds.

        On PostgreSQL a row another transaction is writing is skipped, not waited for:
        that write is this worker's fence (which extends the lease itself) or a cancel,
        and the job is still held. Which are held is then read without a lock (a job
        the sweep is taking from this worker that moment is lost at the next renewal)."""
        wanted = set(job_ids)
        if not wanted:
            return Renewal(set(), set())
        now = self._db.clock()
        statement = renew_statement(self._db.postgres)
        parameters = {"ids": sorted(wanted), "worker": worker_id}

        def write(connection: Connection, _events: Events) -> list[Any]:
            rows = list(
                connection.execute(statement, {**parameters, "lease": now + self._db.lease})
            )
            if self._db.postgres and len(rows) < len(wanted):  # skipped, or not held
                renewed = {row.id for row in rows}
                rows += [
                    row
                    for row in connection.execute(HELD_BY_WORKER, parameters)
                    if row.id not in renewed
                ]
            return rows

        rows = await self._db.write("renewing leases", write, skips_locked=self._db.postgres)
        return Renewal(
            cancelled={row.id for row in rows if row.cancel_requested},
            lost=wanted - {row.id for row in rows},
        )

    async def sweep(self) -> Swept:
        """Jobs whose lease ran out: requeued (retry_count + 1), failed when their
        retries are spent, cancelled when a cancel was asked for meanwhile. On
        PostgreSQL a row another transaction is writing is left for the next sweep."""
        now = self._db.clock()
        done: dict[JobStatus, list[str]] = {}

        def write(connection: Connection, events: Events) -> None:
            for status in SWEPT_TO:
                rows = connection.execute(sweep_statement(status, self._db.postgres), {"now": now})
                done[status] = [row.id for row in rows]
                for job_id in done[status]:
                    events.append((EventType.JOB_STATUS, {"jobId": job_id, "status": status.value}))

        await self._db.write("sweeping lost jobs", write, skips_locked=self._db.postgres)
        return Swept(done[JobStatus.QUEUED], done[JobStatus.FAILED], done[JobStatus.CANCELLED])

    # -- a claimed job's writes (fenced) ----------------------------------------------

    async def records(self, job_id: str) -> list[dict[str, Any]]:
        async with wrap_database_errors("reading a job's records"), self._db.engine.connect() as c:
            rows = await c.execute(
                select(job_records.c.record)
                .where(job_records.c.job_id == job_id)
                .order_by(job_records.c.seq)
            )
            return [dict(row.record) for row in rows]

    async def append_records(
        self,
        claim: Claim,
        first_seq: int,
        records: Sequence[dict[str, Any]],
        *,
        state: dict[str, Any] | None = None,
        clear_answer: bool = False,
        logs: Sequence[tuple[str, str]] = (),
        artifact: NewArtifact | None = None,
    ) -> None:
        """Append records numbered from ``first_seq``: the checkpoint after a step
        (with ``logs``, (step key, line) for the job's log, written with it: a line
        whose key was written before is not written again; and ``artifact``, the
        step's, stored with it).

        Records already there under their numbers, the same, are skipped (a checkpoint
        sent again because its caller was cancelled as it committed); a number taken by
        a different record means another writer got there first: ``LeaseLost``.
        """
        values: dict[str, Any] = {}
        if state is not None:
            values["execution_state"] = state
        if clear_answer:
            values["user_answer"] = None
        await self._checkpoint(
            "checkpointing a job", claim, Checkpoint(first_seq, records, logs, artifact), values
        )

    async def finish(
        self,
        claim: Claim,
        status: JobStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        log: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """End a running job: completed, failed or cancelled; ``log``: its last log line
        (an error's when it failed), and ``checkpoint``: its last records, written with
        it (one write, not two, for a job's last step)."""
        check_transition(JobStatus.RUNNING, status)
        level = "error" if status is JobStatus.FAILED else "info"
        await self._checkpoint(
            "ending a job",
            claim,
            checkpoint or NO_CHECKPOINT,
            {
                "status": status.value,
                "result": result,
                "error_message": error,
                "completed_at": self._db.clock(),
                "lease_expires_at": None,
            },
            (EventType.JOB_STATUS, {"jobId": claim.job.id, "status": status.value}),
            None if log is None else (log, level),
        )

    async def _checkpoint(
        self,
        action: str,
        claim: Claim,
        checkpoint: Checkpoint,
        values: dict[str, Any],
        event: tuple[str, dict[str, Any]] | None = None,
        last_log: tuple[str, str] | None = None,
    ) -> None:
        """The fence (setting ``values``) with the checkpoint's records and log lines,
        then ``last_log`` (line, level) and ``event``."""
        await write_fenced(self._db, action, claim, checkpoint, values, log=last_log, event=event)

    async def pause(
        self, claim: Claim, question: str, state: dict[str, Any], *, log: str | None = None
    ) -> None:
        """The job asked a person: it waits, holding no worker (``log``: written with it)."""
        now = self._db.clock()

        def write(connection: Connection, events: Events) -> None:
            self._db.fence(
                connection,
                claim,
                status=JobStatus.WAITING_FOR_USER.value,
                agent_question=question,
                execution_state=state,
                paused_at=now,
                worker_id=None,
                lease_expires_at=None,
            )
            if log is not None:
                add_log(connection, events, claim.job.id, log, "info", None, now)
            events.append(
                (EventType.JOB_STATUS, {"jobId": claim.job.id, "status": "waiting_for_user"})
            )

        await self._db.write("pausing a job", write, job_id=claim.job.id)

    async def record_discovered(self, claim: Claim, packages: Sequence[str]) -> list[str]:
        """Add MCP servers (by package) to those the job found, seed 002's
        ``tools_discovered``: a resumed run makes their tools callable again."""

        def write(connection: Connection, _events: Events) -> list[str]:
            row = connection.execute(
                select(job_queue.c.tools_discovered).where(job_queue.c.id == claim.job.id)
            ).first()
            known = list(row.tools_discovered or []) if row is not None else []
            found = known + [package for package in packages if package not in known]
            self._db.fence(connection, claim, tools_discovered=found)
            return found

        return await self._db.write("recording discovered tools", write, job_id=claim.job.id)

    async def release(self, claim: Claim) -> None:
        """Give a running job back to the queue (the worker is draining): not a failure,
        so its retries stay as they were."""

        def write(connection: Connection, events: Events) -> None:
            self._db.fence(
                connection,
                claim,
                status=JobStatus.QUEUED.value,
                worker_id=None,
                lease_expires_at=None,
            )
            events.append((EventType.JOB_STATUS, {"jobId": claim.job.id, "status": "queued"}))

        await self._db.write("releasing a job", write, job_id=claim.job.id)

    async def activity_since(self, moment: datetime) -> dict[str, int]:
        """Jobs created and jobs completed since ``moment`` (the metrics route)."""
        async with (
            wrap_database_errors("counting jobs"),
            self._db.engine.connect() as connection,
        ):
            created = await connection.execute(
                select(func.count()).select_from(job_queue).where(job_queue.c.created_at >= moment)
            )
            completed = await connection.execute(
                select(func.count())
                .select_from(job_queue)
                .where(job_queue.c.completed_at >= moment, job_queue.c.status == "completed")
            )
            return {"created": int(created.scalar_one()), "completed": int(completed.scalar_one())}

    async def counts(self, owner: Owner = EVERYONE) -> dict[str, int]:
        """Jobs by status (the metrics route; the dashboard's, of the jobs ``owner`` sees)."""
        query = select(job_queue.c.status, func.count()).group_by(job_queue.c.status)
        if owner is not EVERYONE:
            query = query.where(job_queue.c.api_key_id == owner)
        async with wrap_database_errors("counting jobs"), self._db.engine.connect() as connection:
            rows = await connection.execute(query)
            return {str(row[0]): int(row[1]) for row in rows}

    async def delete(self, job_ids: Iterable[str]) -> None:
        ids = list(job_ids)

        def write(connection: Connection, _events: Events) -> None:
            connection.execute(delete(job_queue).where(job_queue.c.id.in_(ids)))

        await self._db.write("deleting jobs", write)


def _same_owner(column: Any, owner: Owner) -> Any:
    return column.is_(None) if owner is None else column == owner


CREATE_COLUMNS = (
    "id",
    "task",
    "priority",
    "timeout_seconds",
    "model",
    "hitl_mode",
    "allow_network",
    "max_retries",
    "api_key_id",
    "created_at",
    "updated_at",
)
# A job's first log line, in the transaction that creates it: before any worker can log.
FIRST_LOG = {"level": "info", "message": "Job created"}


@functools.cache
def create_statement() -> Any:
    """PostgreSQL's: the new job's row, as inserted, with its first log line written in
    the same statement (a round trip fewer: see ``jobs/fenced.py``)."""
    create = (
        insert(job_queue)
        .values({name: bindparam(name) for name in CREATE_COLUMNS})
        .returning(*job_queue.c)
    )
    new_job = create.cte("new_job")
    first_log = insert(job_logs).from_select(
        ["job_id", "level", "message", "timestamp"],
        select(
            new_job.c.id,
            literal(FIRST_LOG["level"]),
            literal(FIRST_LOG["message"]),
            new_job.c.created_at,
        ),
    )
    # Run although nothing reads it: PostgreSQL runs every data-modifying CTE once.
    return select(new_job).add_cte(first_log.cte("first_log"))


CREATE_ON_POSTGRES = DriverStatement(create_statement())
# SQLite's: the row, and its first log line, each a plain INSERT on the driver's cursor
# (the job is known without reading it back: ``queued_job``). Through SQLAlchemy's
# execute, with RETURNING, creating was a twelfth of the engine's time at 4 workers.
CREATE_ON_SQLITE = DriverStatement(insert(job_queue), CREATE_COLUMNS)
FIRST_LOG_ON_SQLITE = DriverStatement(insert(job_logs), ["job_id", "level", "message", "timestamp"])


def queued_job(values: dict[str, Any]) -> Job:
    """A new job as its row reads once inserted with ``values``: the columns not among
    them hold the table's defaults."""
    return Job(
        id=values["id"],
        task=values["task"],
        status=JobStatus.QUEUED,
        priority=values["priority"],
        timeout_seconds=values["timeout_seconds"],
        model=values["model"],
        hitl_mode=HitlMode(values["hitl_mode"]),
        allow_network=values["allow_network"],
        worker_id=None,
        attempt=0,
        retry_count=0,
        max_retries=values["max_retries"],
        api_key_id=values["api_key_id"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
    )


UPLOADS_OF = (
    select(job_attachments.c.job_id, job_attachments.c.filename)
    .where(job_attachments.c.job_id.in_(bindparam("ids", expanding=True)))
    .order_by(job_attachments.c.created_at, job_attachments.c.id)
)


# Jobs among ``ids`` that worker ``worker`` holds.
HELD = and_(
    job_queue.c.id.in_(bindparam("ids", expanding=True)),
    job_queue.c.worker_id == bindparam("worker"),
    job_queue.c.status == JobStatus.RUNNING.value,
)
HELD_BY_WORKER = select(job_queue.c.id, job_queue.c.cancel_requested).where(HELD)


@functools.cache
def renew_statement(postgres: bool) -> Update:
    """Extend the leases of the worker's running jobs among ``ids``; on PostgreSQL only
    of the rows no other transaction holds (built once: see ``fence_statement``)."""
    return (
        _of_rows(HELD, postgres)
        .values(lease_expires_at=bindparam("lease"))
        .returning(job_queue.c.id, job_queue.c.cancel_requested)
    )


# In this order: a cancel asked for wins over the retries left.
SWEPT_TO = (JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.QUEUED)


@functools.cache
def sweep_statement(status: JobStatus, postgres: bool) -> Update:
    """The running jobs whose lease ran out before ``now`` that go to ``status`` (one of
    ``SWEPT_TO``); on PostgreSQL only the rows no other transaction holds."""
    now: BindParameter[datetime] = bindparam("now")
    extra: dict[JobStatus, tuple[Any, dict[str, Any]]] = {
        JobStatus.CANCELLED: (job_queue.c.cancel_requested.is_(True), {"completed_at": now}),
        JobStatus.FAILED: (
            job_queue.c.retry_count >= job_queue.c.max_retries,
            {"completed_at": now, "error_message": "its worker was lost and its retries are spent"},
        ),
        JobStatus.QUEUED: (
            job_queue.c.retry_count < job_queue.c.max_retries,
            {"retry_count": job_queue.c.retry_count + 1},
        ),
    }
    condition, values = extra[status]
    expired = and_(
        job_queue.c.status == JobStatus.RUNNING.value,
        job_queue.c.lease_expires_at < now,
        condition,
    )
    return (
        _of_rows(expired, postgres)
        .values(
            status=status.value, worker_id=None, lease_expires_at=None, updated_at=now, **values
        )
        .returning(job_queue.c.id)
    )


def _of_rows(where: ColumnElement[bool], postgres: bool) -> Update:
    """An UPDATE of the job rows ``where`` picks; on PostgreSQL of those no other
    transaction holds, locked with FOR NO KEY UPDATE SKIP LOCKED in a CTE (see
    ``claim_statement``). NO KEY: the lock the UPDATE takes anyway, which lets other
    lanes' inserts that refer to the job (its log lines, its records) go on."""
    if not postgres:  # one writer: nothing to wait for
        return update(job_queue).where(where)
    picked = select(job_queue.c.id).where(where)
    unlocked = picked.with_for_update(skip_locked=True, key_share=True).cte("unlocked")
    return update(job_queue).add_cte(unlocked).where(job_queue.c.id.in_(select(unlocked.c.id)))


@functools.cache
def claim_statement(limit: int, postgres: bool) -> Update:
    """Claim the top ``limit`` queued jobs (built once per limit: see ``fence_statement``)."""
    top = (
        select(job_queue.c.id)
        .where(job_queue.c.status == JobStatus.QUEUED.value)
        .order_by(job_queue.c.priority.desc(), job_queue.c.created_at, job_queue.c.id)
        .limit(limit)
    )
    if postgres:
        top = top.with_for_update(skip_locked=True)
    # A CTE, not `id IN (subquery)`: PostgreSQL may run such a subquery again for each
    # row it looks at, and each run locks and skips its way to other rows.
    picked = top.cte("picked")
    returned: list[Any] = list(job_queue.c)
    if postgres:
        # The names of each job's uploads, in the claim's own round trip.
        uploads = job_attachments.c
        returned.append(
            select(
                func.json_agg(aggregate_order_by(uploads.filename, uploads.created_at, uploads.id))
            )
            .where(uploads.job_id == job_queue.c.id)
            .scalar_subquery()
            .label("uploads")
        )
    # On PostgreSQL ``UPDATE ... FROM picked``, each picked row found by its key, and no
    # second test of the status (the rows are locked, and were queued when locked): with
    # ``id IN (SELECT ...) AND status = 'queued'`` the planner scanned every queued row
    # to match them against the picked ids, a claim costing as much as the queue was long.
    picked_ones = (
        [job_queue.c.id == picked.c.id]
        if postgres
        else [job_queue.c.id.in_(select(picked.c.id)), job_queue.c.status == JobStatus.QUEUED.value]
    )
    return (
        update(job_queue)
        .add_cte(picked)
        .where(*picked_ones)
        .values(
            status=JobStatus.RUNNING.value,
            worker_id=bindparam("worker_id"),
            attempt=job_queue.c.attempt + 1,
            started_at=func.coalesce(job_queue.c.started_at, bindparam("now")),
            lease_expires_at=bindparam("lease_expires_at"),
            updated_at=bindparam("now"),
        )
        .returning(*returned)
    )
