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

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, insert, literal, select, true, update
from sqlalchemy.exc import IntegrityError

from claybot.db.errors import StoreError, wrap_database_errors
from claybot.db.tables import job_attachments, job_logs, job_queue, job_records
from claybot.jobs.model import (
    EVERYONE,
    Claim,
    InvalidJobState,
    Job,
    JobNotFound,
    JobStatus,
    LeaseLost,
    NewJob,
    Owner,
    check_transition,
)
from claybot.jobs.sql import JobTables, completes_once_started, job_from_row
from claybot.kernel.errors import NotFound
from claybot.kernel.event_types import EventType


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

    @completes_once_started
    async def create(self, new: NewJob) -> Job:
        now = self._db.clock()
        job_id = str(uuid.uuid4())
        async with self._db.transaction("creating a job") as (connection, events):
            await connection.execute(
                insert(job_queue).values(
                    id=job_id,
                    task=new.task,
                    priority=new.priority,
                    timeout_seconds=new.timeout_seconds,
                    model=new.model,
                    hitl_mode=new.hitl_mode.value,
                    allow_network=new.allow_network,
                    max_retries=new.max_retries,
                    api_key_id=new.api_key_id,
                    created_at=now,
                    updated_at=now,
                )
            )
            if new.attachment_ids:
                attached = await connection.execute(
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
            # Its first log line, in the same transaction: before any worker can log.
            await connection.execute(
                insert(job_logs).values(
                    job_id=job_id, level="info", message="Job created", timestamp=now
                )
            )
            events.append((EventType.JOB_CREATED, {"jobId": job_id, "status": "queued"}))
        return await self.get(job_id)

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
                    .order_by(job_queue.c.created_at.desc(), job_queue.c.id)
                    .limit(limit)
                    .offset(offset)
                )
            ).all()
            count = (
                await connection.execute(select(func.count()).select_from(job_queue).where(where))
            ).scalar_one()
        return [job_from_row(row) for row in rows], int(count)

    @completes_once_started
    async def respond(self, job_id: str, answer: str, owner: Owner = EVERYONE) -> Job:
        """A person answered the job's question: it is queued again with the answer."""
        now = self._db.clock()
        async with self._db.transaction("answering a job") as (connection, events):
            job = await self._db.locked(connection, job_id, owner)
            check_transition(job.status, JobStatus.QUEUED)
            if job.status is not JobStatus.WAITING_FOR_USER:
                raise InvalidJobState(f"job {job_id} is {job.status.value}, not waiting_for_user")
            await connection.execute(
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
        return await self.get(job_id)

    @completes_once_started
    async def cancel(self, job_id: str, owner: Owner = EVERYONE) -> Job:
        """Cancel a queued or waiting job at once; a running one is asked to stop (its
        worker sees the request at its next heartbeat and ends the job ``cancelled``)."""
        now = self._db.clock()
        async with self._db.transaction("cancelling a job") as (connection, events):
            job = await self._db.locked(connection, job_id, owner)
            check_transition(job.status, JobStatus.CANCELLED)
            if job.status is JobStatus.RUNNING:
                await connection.execute(
                    update(job_queue)
                    .where(job_queue.c.id == job_id)
                    .values(cancel_requested=True, updated_at=now)
                )
                events.append((EventType.JOB_CANCEL_REQUESTED, {"jobId": job_id}))
            else:
                await connection.execute(
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
        return await self.get(job_id)

    # -- claiming -------------------------------------------------------------------

    @completes_once_started
    async def claim(self, worker_id: str) -> Claim | None:
        """The top queued job, now running under this worker; None when none is queued."""
        now = self._db.clock()
        top = (
            select(job_queue.c.id)
            .where(job_queue.c.status == JobStatus.QUEUED.value)
            .order_by(job_queue.c.priority.desc(), job_queue.c.created_at, job_queue.c.id)
            .limit(1)
        )
        if self._db.postgres:
            top = top.with_for_update(skip_locked=True)
        async with self._db.transaction("claiming a job") as (connection, events):
            row = (
                await connection.execute(
                    update(job_queue)
                    .where(
                        job_queue.c.id == top.scalar_subquery(),
                        job_queue.c.status == JobStatus.QUEUED.value,
                    )
                    .values(
                        status=JobStatus.RUNNING.value,
                        worker_id=worker_id,
                        attempt=job_queue.c.attempt + 1,
                        started_at=func.coalesce(job_queue.c.started_at, literal(now)),
                        lease_expires_at=now + self._db.lease,
                        updated_at=now,
                    )
                    .returning(*job_queue.c)
                )
            ).first()
            if row is None:
                return None
            events.append((EventType.JOB_STATUS, {"jobId": row.id, "status": "running"}))
        job = job_from_row(row)
        return Claim(job, worker_id, job.attempt)

    @completes_once_started
    async def renew(self, worker_id: str, job_ids: Sequence[str]) -> Renewal:
        """Extend this worker's leases; which of its jobs were asked to cancel, and which
        it no longer holds."""
        if not job_ids:
            return Renewal(set(), set())
        now = self._db.clock()
        async with self._db.transaction("renewing leases") as (connection, _events):
            rows = (
                await connection.execute(
                    update(job_queue)
                    .where(
                        job_queue.c.id.in_(job_ids),
                        job_queue.c.worker_id == worker_id,
                        job_queue.c.status == JobStatus.RUNNING.value,
                    )
                    .values(lease_expires_at=now + self._db.lease)
                    .returning(job_queue.c.id, job_queue.c.cancel_requested)
                )
            ).all()
        return Renewal(
            cancelled={row.id for row in rows if row.cancel_requested},
            lost=set(job_ids) - {row.id for row in rows},
        )

    @completes_once_started
    async def sweep(self) -> Swept:
        """Jobs whose lease ran out: requeued (retry_count + 1), failed when their
        retries are spent, cancelled when a cancel was asked for meanwhile."""
        now = self._db.clock()
        expired = and_(
            job_queue.c.status == JobStatus.RUNNING.value,
            job_queue.c.lease_expires_at < now,
        )
        done: dict[str, list[str]] = {}
        async with self._db.transaction("sweeping lost jobs") as (connection, events):
            for status, extra, values in (
                (
                    JobStatus.CANCELLED,
                    job_queue.c.cancel_requested.is_(True),
                    {"completed_at": now},
                ),
                (
                    JobStatus.FAILED,
                    job_queue.c.retry_count >= job_queue.c.max_retries,
                    {
                        "completed_at": now,
                        "error_message": "its worker was lost and its retries are spent",
                    },
                ),
                (
                    JobStatus.QUEUED,
                    job_queue.c.retry_count < job_queue.c.max_retries,
                    {"retry_count": job_queue.c.retry_count + 1},
                ),
            ):
                rows = (
                    await connection.execute(
                        update(job_queue)
                        .where(expired, extra)
                        .values(
                            status=status.value,
                            worker_id=None,
                            lease_expires_at=None,
                            updated_at=now,
                            **values,
                        )
                        .returning(job_queue.c.id)
                    )
                ).all()
                done[status.value] = [row.id for row in rows]
                for row in rows:
                    events.append((EventType.JOB_STATUS, {"jobId": row.id, "status": status.value}))
        return Swept(done["queued"], done["failed"], done["cancelled"])

    # -- a claimed job's writes (fenced) ----------------------------------------------

    async def records(self, job_id: str) -> list[dict[str, Any]]:
        async with wrap_database_errors("reading a job's records"), self._db.engine.connect() as c:
            rows = await c.execute(
                select(job_records.c.record)
                .where(job_records.c.job_id == job_id)
                .order_by(job_records.c.seq)
            )
            return [dict(row.record) for row in rows]

    @completes_once_started
    async def append_records(
        self,
        claim: Claim,
        first_seq: int,
        records: Sequence[dict[str, Any]],
        *,
        state: dict[str, Any] | None = None,
        clear_answer: bool = False,
    ) -> None:
        """Append records numbered from ``first_seq``: the checkpoint after a step.

        Records already there under their numbers, the same, are skipped (a checkpoint
        sent again because its caller was cancelled as it committed); a number taken by
        a different record means another writer got there first: ``LeaseLost``.
        """
        values: dict[str, Any] = {}
        if state is not None:
            values["execution_state"] = state
        if clear_answer:
            values["user_answer"] = None
        rows = [
            {"job_id": claim.job.id, "seq": first_seq + n, "record": record}
            for n, record in enumerate(records)
        ]
        try:
            async with self._db.transaction("checkpointing a job") as (connection, _events):
                await self._db.fence(connection, claim, **values)
                if rows:
                    await connection.execute(insert(job_records), rows)
            return
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise
        # A number is taken: by these very records (sent again after a cancel as they
        # committed), or by another writer. Rare, so checked only now.
        async with self._db.transaction("checkpointing a job") as (connection, _events):
            await self._db.fence(connection, claim, **values)
            present = (
                await connection.execute(
                    select(job_records.c.seq, job_records.c.record)
                    .where(job_records.c.job_id == claim.job.id, job_records.c.seq >= first_seq)
                    .order_by(job_records.c.seq)
                )
            ).all()
            for row in present:
                index = row.seq - first_seq
                if index >= len(records) or dict(row.record) != records[index]:
                    raise LeaseLost(f"job {claim.job.id}'s records were written by another worker")
            if len(present) < len(records):
                await connection.execute(insert(job_records), rows[len(present) :])

    @completes_once_started
    async def finish(
        self,
        claim: Claim,
        status: JobStatus,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        """End a running job: completed, failed or cancelled."""
        check_transition(JobStatus.RUNNING, status)
        now = self._db.clock()
        async with self._db.transaction("ending a job") as (connection, events):
            await self._db.fence(
                connection,
                claim,
                status=status.value,
                result=result,
                error_message=error,
                completed_at=now,
                lease_expires_at=None,
            )
            events.append((EventType.JOB_STATUS, {"jobId": claim.job.id, "status": status.value}))

    @completes_once_started
    async def pause(self, claim: Claim, question: str, state: dict[str, Any]) -> None:
        """The job asked a person: it waits, holding no worker."""
        now = self._db.clock()
        async with self._db.transaction("pausing a job") as (connection, events):
            await self._db.fence(
                connection,
                claim,
                status=JobStatus.WAITING_FOR_USER.value,
                agent_question=question,
                execution_state=state,
                paused_at=now,
                worker_id=None,
                lease_expires_at=None,
            )
            events.append(
                (EventType.JOB_STATUS, {"jobId": claim.job.id, "status": "waiting_for_user"})
            )

    @completes_once_started
    async def record_discovered(self, claim: Claim, packages: Sequence[str]) -> list[str]:
        """Add MCP servers (by package) to those the job found, seed 002's
        ``tools_discovered``: a resumed run makes their tools callable again."""
        async with self._db.transaction("recording discovered tools") as (connection, _events):
            row = (
                await connection.execute(
                    select(job_queue.c.tools_discovered).where(job_queue.c.id == claim.job.id)
                )
            ).first()
            known = list(row.tools_discovered or []) if row is not None else []
            found = known + [package for package in packages if package not in known]
            await self._db.fence(connection, claim, tools_discovered=found)
        return found

    @completes_once_started
    async def release(self, claim: Claim) -> None:
        """Give a running job back to the queue (the worker is draining): not a failure,
        so its retries stay as they were."""
        async with self._db.transaction("releasing a job") as (connection, events):
            await self._db.fence(
                connection,
                claim,
                status=JobStatus.QUEUED.value,
                worker_id=None,
                lease_expires_at=None,
            )
            events.append((EventType.JOB_STATUS, {"jobId": claim.job.id, "status": "queued"}))

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

    async def counts(self) -> dict[str, int]:
        """Jobs by status (the metrics route)."""
        async with wrap_database_errors("counting jobs"), self._db.engine.connect() as connection:
            rows = await connection.execute(
                select(job_queue.c.status, func.count()).group_by(job_queue.c.status)
            )
            return {str(row[0]): int(row[1]) for row in rows}

    @completes_once_started
    async def delete(self, job_ids: Iterable[str]) -> None:
        async with self._db.transaction("deleting jobs") as (connection, _events):
            await connection.execute(delete(job_queue).where(job_queue.c.id.in_(list(job_ids))))


def _same_owner(column: Any, owner: Owner) -> Any:
    return column.is_(None) if owner is None else column == owner
