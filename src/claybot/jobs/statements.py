"""The SQL of the job store's jobs and claims (``store.py``), each statement built once
and named for what it does: creating a job, claiming the top queued ones, renewing a
worker's leases and sweeping the jobs whose lease ran out.

PostgreSQL and SQLite get different statements where it pays: on PostgreSQL the claim,
the renewal and the sweep take their rows with ``SKIP LOCKED`` (so two writers never
wait on each other: ``writer.py``), and creating a job writes its first log line in
the same statement; SQLite has one writer, and plain statements on the driver's
cursor there.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Update,
    and_,
    bindparam,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by

from claybot.db.driver_statement import DriverStatement
from claybot.db.tables import job_attachments, job_logs, job_queue
from claybot.jobs.model import HitlMode, Job, JobStatus, Owner
from claybot.jobs.port import LOST_WORKER_ERROR


def same_owner(column: Any, owner: Owner) -> Any:
    """``column`` names ``owner`` (a key id, or None: the engine's owner)."""
    return column.is_(None) if owner is None else column == owner


# -- creating a job ------------------------------------------------------------------

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


# -- claiming ------------------------------------------------------------------------

UPLOADS_OF = (
    select(job_attachments.c.job_id, job_attachments.c.filename)
    .where(job_attachments.c.job_id.in_(bindparam("ids", expanding=True)))
    .order_by(job_attachments.c.created_at, job_attachments.c.id)
)


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


# -- renewing a worker's leases -------------------------------------------------------

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


# -- sweeping the jobs whose lease ran out ---------------------------------------------


@functools.cache
def sweep_statement(status: JobStatus, postgres: bool) -> Update:
    """The running jobs whose lease ran out before ``now`` that go to ``status`` (one of
    ``SWEPT_TO``); on PostgreSQL only the rows no other transaction holds."""
    now: BindParameter[datetime] = bindparam("now")
    extra: dict[JobStatus, tuple[Any, dict[str, Any]]] = {
        JobStatus.CANCELLED: (job_queue.c.cancel_requested.is_(True), {"completed_at": now}),
        JobStatus.FAILED: (
            job_queue.c.retry_count >= job_queue.c.max_retries,
            {"completed_at": now, "error_message": LOST_WORKER_ERROR},
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
