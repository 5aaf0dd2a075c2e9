"""Jobs and their claims (seed 002's ``job_queue`` and ``job_records``) on SQLite or
PostgreSQL: the SQL implementation of ``JobStore`` (``port.py``).

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

The claim, the fence and every transition that needs one are one protocol over one
row, so they stay together here, where one checks that no write escapes the fence;
the statements they run are in ``statements.py`` (and the fenced checkpoint's in
``fenced.py``). Logs, files and workers, which need no status transitions, live
beside it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, and_, delete, func, select, true, update

from claybot.agents.records import HistoryRecord
from claybot.db.driver_statement import Sent
from claybot.db.errors import wrap_database_errors
from claybot.db.tables import job_attachments, job_queue, job_records
from claybot.jobs.fenced import write_fenced
from claybot.jobs.logs import add_log
from claybot.jobs.model import (
    EVERYONE,
    Claim,
    InvalidJobState,
    Job,
    JobNotFound,
    JobStatus,
    NewJob,
    Owner,
    check_transition,
)
from claybot.jobs.port import (
    NO_CHECKPOINT,
    SWEPT_TO,
    Checkpoint,
    JobStore,
    NewArtifact,
    Renewal,
    Swept,
)
from claybot.jobs.record_rows import record_of_row
from claybot.jobs.sql import JobTables, job_from_row
from claybot.jobs.statements import (
    CREATE_ON_POSTGRES,
    CREATE_ON_SQLITE,
    FIRST_LOG,
    FIRST_LOG_ON_SQLITE,
    HELD_BY_WORKER,
    UPLOADS_OF,
    claim_statement,
    create_statement,
    queued_job,
    renew_statement,
    same_owner,
    sweep_statement,
)
from claybot.jobs.writer import Events, TwoStep
from claybot.kernel.errors import NotFound
from claybot.kernel.event_types import EventType


class SqlJobStore(JobStore):
    """``JobStore`` over SQLite or PostgreSQL (``JobTables``: reads on the engine,
    writes through the writer)."""

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
                        same_owner(job_attachments.c.api_key_id, new.api_key_id),
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

    async def records(self, job_id: str) -> list[HistoryRecord]:
        """The job's records, typed from their rows' JSON (``JobStore.records``)."""
        async with wrap_database_errors("reading a job's records"), self._db.engine.connect() as c:
            rows = await c.execute(
                select(job_records.c.seq, job_records.c.record)
                .where(job_records.c.job_id == job_id)
                .order_by(job_records.c.seq)
            )
            return [record_of_row(row.seq, row.record) for row in rows]

    async def append_records(
        self,
        claim: Claim,
        first_seq: int,
        records: Sequence[HistoryRecord],
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

        Records already there under their numbers, the same (their JSON is), are
        skipped (a checkpoint sent again because its caller was cancelled as it
        committed); a number taken by a different record means another writer got there
        first: ``LeaseLost``.
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
