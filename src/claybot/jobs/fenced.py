"""A claimed job's step in one write: the fence, its records, log lines and artifact.

After every step a job writes the same things under its claim: the fence (the UPDATE
of its row that must match exactly one row, ``JobTables.fence``), the step's records in
``job_records``, the step's lines in ``job_logs``, and for ``write_file`` the artifact
in ``job_artifacts``. On SQLite they are separate statements, which cost nothing but
the statements. On PostgreSQL every statement is a round trip that the writer's lane
waits for, and those waits were what bounded its jobs per second (the lanes' threads
sat in ``Connection.wait`` 40 % of the run), so there they are one statement: the
fence is a CTE, and the rest are inserted from its RETURNING, so a fence that matched
nothing inserts nothing. That statement is a ``TwoStep`` write: the writer sends a
batch's in one pipeline, and each reads its answer when they are all back.

Both say the same things back: ``LeaseLost`` when the fence did not hold; the records
already there under their numbers, the same, are skipped (a checkpoint sent again
because its caller was cancelled as it committed), and a number taken by a different
record means another writer got there first (``LeaseLost`` too); a line whose step
key was written before is not written again.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TypedDict

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    Integer,
    LargeBinary,
    String,
    bindparam,
    func,
    insert,
    literal,
    null,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.types import JSON

from claybot.db.driver_statement import DriverStatement, Sent
from claybot.db.errors import StoreError
from claybot.db.tables import job_artifacts, job_logs, job_queue, job_records
from claybot.jobs.logs import add_log
from claybot.jobs.model import Claim, LeaseLost
from claybot.jobs.port import Checkpoint, NewArtifact
from claybot.jobs.record_rows import RecordRow, record_rows
from claybot.jobs.sql import JobTables, fence_update, lease_lost
from claybot.jobs.writer import Events, TwoStep
from claybot.kernel.event_types import EventType


@dataclass(frozen=True)
class LogLine:
    key: str | None  # the step that wrote it; None: written every time
    message: str
    level: str = "info"


async def write_fenced(
    tables: JobTables,
    action: str,
    claim: Claim,
    checkpoint: Checkpoint,
    values: dict[str, Any] | None = None,
    *,
    log: tuple[str, str] | None = None,
    event: tuple[str, dict[str, Any]] | None = None,
) -> str | None:
    """One transaction of a claimed job: the fence (setting ``values``), the
    checkpoint's records, log lines and artifact (its id is returned; written again
    under its name, an artifact is replaced and keeps its id), and ``log`` (line,
    level: a line of no step). ``event`` is published once it committed."""
    lines = [LogLine(key, line) for key, line in checkpoint.logs]
    if log is not None:
        lines.append(LogLine(None, *log))
    fenced = _FencedWrite(tables, claim, checkpoint, lines, values or {})

    if tables.postgres:
        return await tables.write(
            action,
            TwoStep(fenced.send, partial(fenced.receive, event=event)),
            job_id=claim.job.id,
        )

    def transaction(connection: Connection, events: Events, *, careful: bool = False) -> str | None:
        artifact_id = fenced.in_statements(connection, events, careful=careful)
        if event is not None:
            events.append(event)
        return artifact_id

    try:
        return await tables.write(action, transaction, job_id=claim.job.id)
    except StoreError as exc:
        if not isinstance(exc.__cause__, IntegrityError):
            raise
    # SQLite: a number is taken, by these very records (sent again after a cancel as
    # they committed) or by another writer. Rare, so looked into only now.
    return await tables.write(action, partial(transaction, careful=True), job_id=claim.job.id)


class ArtifactParams(TypedDict):
    """The artifact's bind parameters in ``PUT_ARTIFACT`` and the checkpoint statement."""

    a_id: str
    a_filename: str
    a_mime_type: str | None
    a_content: bytes
    a_size_bytes: int
    a_created_at: datetime


@dataclass(frozen=True)
class _FencedWrite:
    tables: JobTables
    claim: Claim
    checkpoint: Checkpoint
    lines: list[LogLine]
    values: dict[str, Any]

    @property
    def artifact(self) -> NewArtifact | None:
        return self.checkpoint.artifact

    @functools.cached_property
    def rows(self) -> list[RecordRow]:
        return record_rows(self.claim.job.id, self.checkpoint.first_seq, self.checkpoint.records)

    @property
    def artifact_values(self) -> ArtifactParams | None:
        if self.artifact is None:
            return None
        return ArtifactParams(
            a_id=str(uuid.uuid4()),
            a_filename=self.artifact.filename,
            a_mime_type=self.artifact.mime_type,
            a_content=self.artifact.content,
            a_size_bytes=len(self.artifact.content),
            a_created_at=self.artifact.created_at,
        )

    def in_statements(self, connection: Connection, events: Events, *, careful: bool) -> str | None:
        self.tables.fence(connection, self.claim, **self.values)
        if careful:
            insert_records(connection, self.claim, self.checkpoint.first_seq, self.rows)
        elif self.checkpoint.records:
            INSERT_RECORDS.executemany(connection, self.rows)
        now, job_id = self.tables.clock(), self.claim.job.id
        for line in self.lines:
            add_log(connection, events, job_id, line.message, line.level, None, now, line.key)
        artifact = self.artifact_values
        if artifact is None:
            return None
        stored = PUT_ARTIFACT.execute(connection, {"f_id": job_id, **artifact}).first
        return str(stored[0])

    def send(self, connection: Connection) -> Sent:
        """PostgreSQL's: all of it in one statement, its answer read by ``receive``."""
        now, claim = self.tables.clock(), self.claim
        statement = fenced_checkpoint_statement(frozenset(self.values), self.artifact is not None)
        return statement.send(
            connection,
            {
                "f_id": claim.job.id,
                "f_worker": claim.worker_id,
                "f_attempt": claim.attempt,
                "f_now": now,
                "f_lease": now + self.tables.lease,
                "c_first_seq": self.checkpoint.first_seq,
                "c_records": [row["record"] for row in self.rows],
                "c_logs": [
                    {"key": line.key, "message": line.message, "level": line.level}
                    for line in self.lines
                ],
                **{f"v_{name}": value for name, value in self.values.items()},
                **(self.artifact_values or {}),
            },
        )

    def receive(
        self,
        connection: Connection,
        sent: Sent,
        events: Events,
        *,
        event: tuple[str, dict[str, Any]] | None,
    ) -> str | None:
        claim = self.claim
        fenced, recorded, logged, artifact_id = sent.ran().first
        if fenced != 1:
            raise lease_lost(claim)
        if recorded < len(self.checkpoint.records):
            # Some numbers were taken: by these records (sent again), or by another's.
            insert_records(connection, claim, self.checkpoint.first_seq, self.rows, insert=False)
        for log_id, level, message in logged or ():
            events.append(
                (
                    EventType.JOB_LOG,
                    {"jobId": claim.job.id, "id": log_id, "level": level, "message": message},
                )
            )
        if event is not None:
            events.append(event)
        return None if artifact_id is None else str(artifact_id)


def insert_records(
    connection: Connection,
    claim: Claim,
    first_seq: int,
    rows: list[RecordRow],
    *,
    insert: bool = True,
) -> None:
    """Insert ``rows``, the checkpoint's records, but those already there under their
    numbers, which must be the same (their JSON): a number taken by another record
    means another writer got there first. ``insert=False``: only check (PostgreSQL's
    statement inserted the others)."""
    present = connection.execute(RECORDS_FROM, {"job_id": claim.job.id, "seq": first_seq}).all()
    for row in present:
        index = row.seq - first_seq
        if index >= len(rows) or dict(row.record) != rows[index]["record"]:
            raise LeaseLost(f"job {claim.job.id}'s records were written by another worker")
    if insert and len(present) < len(rows):
        INSERT_RECORDS.executemany(connection, rows[len(present) :])


@functools.cache
def fenced_checkpoint_statement(names: frozenset[str], artifact: bool) -> DriverStatement:
    """PostgreSQL's checkpoint in one statement, setting ``names`` with the fence, and
    storing an artifact if ``artifact`` (built once for each, as ``fence_statement``
    is). It answers one row: the rows the fence matched (1, or 0 when the claim is
    lost), the records it inserted, the lines it logged as [id, level, message] in
    order, and the artifact's id (None without one)."""
    fence = fence_update(names).returning(job_queue.c.id).cte("fence")
    records = _elements("c_records", "checkpoint_records")
    new_records = (
        pg_insert(job_records)
        .from_select(
            ["job_id", "seq", "record"],
            select(
                fence.c.id,
                bindparam("c_first_seq", type_=Integer) + records.c.n - 1,
                records.c.value,
            )
            .select_from(fence)
            .join(records, true()),
        )
        .on_conflict_do_nothing(index_elements=[job_records.c.job_id, job_records.c.seq])
        .returning(job_records.c.seq)
        .cte("new_records")
    )
    lines = _elements("c_logs", "checkpoint_lines")
    new_logs = (
        pg_insert(job_logs)
        .from_select(
            ["job_id", "level", "message", "timestamp", "step_key"],
            select(
                fence.c.id,
                lines.c.value.op("->>")(literal("level")),
                lines.c.value.op("->>")(literal("message")),
                bindparam("f_now"),
                lines.c.value.op("->>")(literal("key")),
            )
            .select_from(fence)
            .join(lines, true())
            .order_by(lines.c.n),  # ids in the lines' order
        )
        .on_conflict_do_nothing(index_elements=[job_logs.c.job_id, job_logs.c.step_key])
        .returning(job_logs.c.id, job_logs.c.level, job_logs.c.message)
        .cte("new_logs")
    )
    logged = func.json_agg(
        aggregate_order_by(
            func.json_build_array(new_logs.c.id, new_logs.c.level, new_logs.c.message),
            new_logs.c.id,
        )
    )
    stored: Any = null()
    if artifact:
        stored = select(_put_artifact(pg_insert, fence).cte("stored").c.id).scalar_subquery()
    return DriverStatement(
        select(
            select(func.count()).select_from(fence).scalar_subquery(),
            select(func.count()).select_from(new_records).scalar_subquery(),
            select(logged).scalar_subquery(),
            stored,
        )
    )


def _put_artifact(dialect_insert: Any, rows: Any, *where: Any) -> Any:
    """INSERT, or UPDATE of the artifact of that name (which keeps its id), RETURNING
    its id, for the job of each of ``rows`` (by its ``id``) that matches ``where``:
    the fence's row on PostgreSQL, the job's on SQLite."""
    columns = ["id", "job_id", "filename", "mime_type", "content", "size_bytes", "created_at"]
    source = select(
        bindparam("a_id", type_=String),
        rows.c.id,
        bindparam("a_filename", type_=String),
        bindparam("a_mime_type", type_=String),
        bindparam("a_content", type_=LargeBinary),
        bindparam("a_size_bytes", type_=BigInteger),
        bindparam("a_created_at", type_=DateTime(timezone=True)),
    ).select_from(rows)
    if where:
        source = source.where(*where)
    statement = dialect_insert(job_artifacts).from_select(columns, source)
    return statement.on_conflict_do_update(
        index_elements=[job_artifacts.c.job_id, job_artifacts.c.filename],
        set_={name: statement.excluded[name] for name in columns[3:]},
    ).returning(job_artifacts.c.id)


def _elements(name: str, alias: str) -> Any:
    """``json_array_elements(:name) WITH ORDINALITY``: the JSON array parameter's items
    (``value``) and their places from 1 (``n``)."""
    return (
        func.json_array_elements(bindparam(name, type_=JSON))
        .table_valued("value", with_ordinality="n")
        .render_derived(alias)
    )


# SQLite's (it has no data-modifying CTEs); the job's row is there: the fence found it.
PUT_ARTIFACT = DriverStatement(
    _put_artifact(sqlite_insert, job_queue, job_queue.c.id == bindparam("f_id"))
)
INSERT_RECORDS = DriverStatement(insert(job_records), ("job_id", "seq", "record"))
RECORDS_FROM = (
    select(job_records.c.seq, job_records.c.record)
    .where(job_records.c.job_id == bindparam("job_id"), job_records.c.seq >= bindparam("seq"))
    .order_by(job_records.c.seq)
)
