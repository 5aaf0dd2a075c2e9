"""The job store's twin in memory: ``JobStore``, ``JobLogStore`` and ``JobEvents``
(``port.py``) over dicts, for tests and demos that need no database.

It is held to the same contract suite as the SQL store (``tests/jobs/contract/``):
the same claims and leases, the same fence before every claimed write, the same moves
refused, the same log lines and events, in the same order. Each call runs to its end
without awaiting anything, so on one event loop it is as atomic as a transaction: it
checks everything a write could refuse before it changes anything, so a refused write
leaves nothing behind. Records and states are copied in and out, as the database's
JSON columns copy them.

It knows no uploads (those are ``JobFiles``'s): a job created with attachments is
refused as one naming an unknown upload is. Artifacts written with a checkpoint are
kept, and ``artifacts`` lists them as ``JobFiles.artifacts`` does. A log line for a
job that does not exist is ``JobNotFound`` here; the database refuses it by its
foreign key (a ``StoreError``), which no caller relies on.
"""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from claybot.agents.records import HistoryRecord
from claybot.jobs.model import (
    EVERYONE,
    Claim,
    InvalidJobState,
    Job,
    JobNotFound,
    JobStatus,
    LeaseLost,
    LogLine,
    NewJob,
    Owner,
    StoredFile,
    check_transition,
)
from claybot.jobs.port import (
    DEFAULT_LEASE,
    LOST_WORKER_ERROR,
    NO_CHECKPOINT,
    SWEPT_TO,
    Checkpoint,
    Clock,
    JobEvents,
    JobLogStore,
    JobStore,
    Listener,
    NewArtifact,
    Renewal,
    Swept,
)
from claybot.jobs.record_rows import record_of_row, record_rows
from claybot.kernel.errors import NotFound
from claybot.kernel.event_types import EventType

Event = tuple[str, dict[str, Any]]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class MemoryJobStore(JobStore, JobEvents):
    def __init__(self, *, clock: Clock = _utcnow, lease: timedelta = DEFAULT_LEASE) -> None:
        self.clock = clock
        self.lease = lease
        self.logs = MemoryJobLogs(self)
        self._jobs: dict[str, Job] = {}  # in the order they were created
        self._leases: dict[str, datetime] = {}  # running jobs' only
        self._records: dict[str, dict[int, dict[str, Any]]] = {}  # rows' JSON, by number
        self._lines: dict[str, list[LogLine]] = {}
        self._step_keys: dict[str, set[str]] = {}
        self._artifacts: dict[str, dict[str, StoredFile]] = {}  # by job, then filename
        self._last_line_id = 0
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    # -- jobs -------------------------------------------------------------------------

    async def create(self, new: NewJob) -> Job:
        if new.attachment_ids:
            raise NotFound(
                "an attachment is unknown, not yours, or attached to another job",
                field="attachments",
            )
        now = self.clock()
        job = Job(
            id=str(uuid.uuid4()),
            task=new.task,
            status=JobStatus.QUEUED,
            priority=new.priority,
            timeout_seconds=new.timeout_seconds,
            model=new.model,
            hitl_mode=new.hitl_mode,
            allow_network=new.allow_network,
            worker_id=None,
            attempt=0,
            retry_count=0,
            max_retries=new.max_retries,
            api_key_id=new.api_key_id,
            created_at=now,
            updated_at=now,
        )
        self._store(job)
        self._records[job.id] = {}
        self._lines[job.id] = []
        self._step_keys[job.id] = set()
        self._artifacts[job.id] = {}
        self._add_line(job.id, "Job created", "info", None, now, None)  # heard as job.created
        self._publish([(EventType.JOB_CREATED, {"jobId": job.id, "status": "queued"})])
        return copy.deepcopy(job)

    async def get(self, job_id: str, owner: Owner = EVERYONE) -> Job:
        return copy.deepcopy(self._visible(job_id, owner))

    async def page(
        self,
        owner: Owner = EVERYONE,
        *,
        status: JobStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[Job], int]:
        found = [
            job
            for job in self._jobs.values()
            if (owner is EVERYONE or job.api_key_id == owner)
            and (status is None or job.status is status)
        ]
        found.sort(key=lambda job: (job.created_at, job.id), reverse=True)
        return copy.deepcopy(found[offset : offset + limit]), len(found)

    async def respond(self, job_id: str, answer: str, owner: Owner = EVERYONE) -> Job:
        job = self._visible(job_id, owner)
        check_transition(job.status, JobStatus.QUEUED)
        if job.status is not JobStatus.WAITING_FOR_USER:
            raise InvalidJobState(f"job {job_id} is {job.status.value}, not waiting_for_user")
        answered = self._store(
            replace(
                job,
                status=JobStatus.QUEUED,
                user_answer=answer,
                agent_question=None,
                paused_at=None,
                updated_at=self.clock(),
            )
        )
        self._publish([(EventType.JOB_STATUS, {"jobId": job_id, "status": "queued"})])
        return answered

    async def cancel(self, job_id: str, owner: Owner = EVERYONE) -> Job:
        job = self._visible(job_id, owner)
        check_transition(job.status, JobStatus.CANCELLED)
        now = self.clock()
        if job.status is JobStatus.RUNNING:  # its worker ends it at its next renewal
            asked = self._store(replace(job, cancel_requested=True, updated_at=now))
            self._publish([(EventType.JOB_CANCEL_REQUESTED, {"jobId": job_id})])
            return asked
        cancelled = self._store(
            replace(
                job,
                status=JobStatus.CANCELLED,
                completed_at=now,
                agent_question=None,
                updated_at=now,
            )
        )
        self._publish([(EventType.JOB_STATUS, {"jobId": job_id, "status": "cancelled"})])
        return cancelled

    async def counts(self, owner: Owner = EVERYONE) -> dict[str, int]:
        return dict(
            Counter(
                job.status.value
                for job in self._jobs.values()
                if owner is EVERYONE or job.api_key_id == owner
            )
        )

    async def activity_since(self, moment: datetime) -> dict[str, int]:
        jobs = self._jobs.values()
        return {
            "created": sum(job.created_at >= moment for job in jobs),
            "completed": sum(
                job.status is JobStatus.COMPLETED
                and job.completed_at is not None
                and job.completed_at >= moment
                for job in jobs
            ),
        }

    async def delete(self, job_ids: Iterable[str]) -> None:
        for job_id in set(job_ids):
            for kept in (
                self._jobs,
                self._leases,
                self._records,
                self._lines,
                self._step_keys,
                self._artifacts,
            ):
                kept.pop(job_id, None)

    # -- claims and leases -----------------------------------------------------------

    async def claim(self, worker_id: str) -> Claim | None:
        claims = await self.claim_many(worker_id, 1)
        return claims[0] if claims else None

    async def claim_many(self, worker_id: str, limit: int) -> list[Claim]:
        now = self.clock()
        queued = [job for job in self._jobs.values() if job.status is JobStatus.QUEUED]
        queued.sort(key=lambda job: (-job.priority, job.created_at, job.id))
        claims = []
        for job in queued[: max(limit, 0)]:
            running = self._store(
                replace(
                    job,
                    status=JobStatus.RUNNING,
                    worker_id=worker_id,
                    attempt=job.attempt + 1,
                    started_at=job.started_at or now,
                    updated_at=now,
                )
            )
            self._leases[job.id] = now + self.lease
            claims.append(Claim(running, worker_id, running.attempt))
        self._publish(
            [(EventType.JOB_STATUS, {"jobId": c.job.id, "status": "running"}) for c in claims]
        )
        return claims

    async def renew(self, worker_id: str, job_ids: Sequence[str]) -> Renewal:
        wanted = set(job_ids)
        held = [
            job
            for job_id in wanted
            if (job := self._jobs.get(job_id)) is not None
            and job.worker_id == worker_id
            and job.status is JobStatus.RUNNING
        ]
        lease = self.clock() + self.lease
        for job in held:
            self._leases[job.id] = lease
        return Renewal(
            cancelled={job.id for job in held if job.cancel_requested},
            lost=wanted - {job.id for job in held},
        )

    async def sweep(self) -> Swept:
        now = self.clock()
        done: dict[JobStatus, list[str]] = {status: [] for status in SWEPT_TO}
        events: list[Event] = []
        for status in SWEPT_TO:
            for job in list(self._jobs.values()):
                if job.status is not JobStatus.RUNNING or not self._leases[job.id] < now:
                    continue
                values: dict[str, Any]
                if status is JobStatus.CANCELLED and job.cancel_requested:
                    values = {"completed_at": now}
                elif status is JobStatus.FAILED and job.retry_count >= job.max_retries:
                    values = {"completed_at": now, "error_message": LOST_WORKER_ERROR}
                elif status is JobStatus.QUEUED and job.retry_count < job.max_retries:
                    values = {"retry_count": job.retry_count + 1}
                else:
                    continue
                self._store(replace(job, status=status, worker_id=None, updated_at=now, **values))
                del self._leases[job.id]
                done[status].append(job.id)
                events.append((EventType.JOB_STATUS, {"jobId": job.id, "status": status.value}))
        self._publish(events)
        return Swept(done[JobStatus.QUEUED], done[JobStatus.FAILED], done[JobStatus.CANCELLED])

    # -- a claimed job's records and writes (fenced) ---------------------------------

    async def records(self, job_id: str) -> list[HistoryRecord]:
        """The job's records, typed from their rows' JSON (``JobStore.records``)."""
        kept = self._records.get(job_id, {})
        # A copy: a record's free-form fields (a tool call's arguments) are the row's own.
        return [record_of_row(seq, copy.deepcopy(kept[seq])) for seq in sorted(kept)]

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
        values: dict[str, Any] = {}
        if state is not None:
            values["execution_state"] = copy.deepcopy(state)
        if clear_answer:
            values["user_answer"] = None
        self._checkpoint(claim, Checkpoint(first_seq, records, logs, artifact), values)

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
        check_transition(JobStatus.RUNNING, status)
        level = "error" if status is JobStatus.FAILED else "info"
        self._checkpoint(
            claim,
            checkpoint or NO_CHECKPOINT,
            {
                "status": status,
                "result": result,
                "error_message": error,
                "completed_at": self.clock(),
            },
            ended=True,
            event=(EventType.JOB_STATUS, {"jobId": claim.job.id, "status": status.value}),
            last_log=None if log is None else (log, level),
        )

    async def pause(
        self, claim: Claim, question: str, state: dict[str, Any], *, log: str | None = None
    ) -> None:
        now = self.clock()
        self._checkpoint(
            claim,
            NO_CHECKPOINT,
            {
                "status": JobStatus.WAITING_FOR_USER,
                "agent_question": question,
                "execution_state": copy.deepcopy(state),
                "paused_at": now,
                "worker_id": None,
            },
            ended=True,
            event=(EventType.JOB_STATUS, {"jobId": claim.job.id, "status": "waiting_for_user"}),
            last_log=None if log is None else (log, "info"),
        )

    async def record_discovered(self, claim: Claim, packages: Sequence[str]) -> list[str]:
        job = self._jobs.get(claim.job.id)
        known = list(job.tools_discovered or []) if job is not None else []
        found = known + [package for package in packages if package not in known]
        self._checkpoint(claim, NO_CHECKPOINT, {"tools_discovered": found})
        return list(found)

    async def release(self, claim: Claim) -> None:
        self._checkpoint(
            claim,
            NO_CHECKPOINT,
            {"status": JobStatus.QUEUED, "worker_id": None},
            ended=True,
            event=(EventType.JOB_STATUS, {"jobId": claim.job.id, "status": "queued"}),
        )

    # -- inside -----------------------------------------------------------------------

    def artifacts(self, job_id: str) -> list[StoredFile]:
        """The artifacts checkpoints stored, without their content (as ``JobFiles``)."""
        kept = self._artifacts.get(job_id, {}).values()
        return sorted(
            (replace(artifact, content=None) for artifact in kept),
            key=lambda artifact: (artifact.created_at, artifact.id),
        )

    def _visible(self, job_id: str, owner: Owner) -> Job:
        job = self._jobs.get(job_id)
        if job is None or (owner is not EVERYONE and job.api_key_id != owner):
            raise JobNotFound(job_id)  # another key's job is as unknown as a missing one
        return job

    def _store(self, job: Job) -> Job:
        """Keep ``job``; a copy for the caller (as a row read back: theirs to change)."""
        self._jobs[job.id] = job
        return copy.deepcopy(job)

    def _fenced(self, claim: Claim, values: dict[str, Any]) -> Job:
        """The claimed job as the fence leaves it (``values`` set); ``LeaseLost`` when
        the claim no longer holds. Stores nothing: the caller does, once nothing more
        can refuse the write."""
        job = self._jobs.get(claim.job.id)
        if (
            job is None
            or job.status is not JobStatus.RUNNING
            or (job.worker_id, job.attempt) != (claim.worker_id, claim.attempt)
        ):
            raise LeaseLost(
                f"job {claim.job.id} is no longer held by {claim.worker_id} "
                f"(attempt {claim.attempt})"
            )
        return replace(job, updated_at=self.clock(), **values)

    def _checkpoint(
        self,
        claim: Claim,
        checkpoint: Checkpoint,
        values: dict[str, Any],
        *,
        ended: bool = False,
        event: Event | None = None,
        last_log: tuple[str, str] | None = None,
    ) -> None:
        """The fence (setting ``values``; ``ended``: the job holds no lease after it)
        with the checkpoint's records, log lines and artifact, then ``last_log`` (line,
        level) and ``event``: all of it, or ``LeaseLost`` and none of it."""
        job = self._fenced(claim, values)
        kept = self._records[job.id]
        # Rows as the SQL stores keep them: the records' JSON, compared as JSON.
        rows = record_rows(job.id, checkpoint.first_seq, checkpoint.records)
        new = {row["seq"]: row["record"] for row in rows}
        if new.keys() & kept.keys():
            # Some numbers are taken: by these very records (sent again), or by another's.
            for seq in (seq for seq in kept if seq >= checkpoint.first_seq):
                if seq not in new or kept[seq] != new[seq]:
                    raise LeaseLost(f"job {job.id}'s records were written by another worker")
        now = self.clock()
        self._store(job)
        if ended:
            self._leases.pop(job.id, None)
        else:
            self._leases[job.id] = now + self.lease
        kept.update({seq: row for seq, row in new.items() if seq not in kept})
        events: list[Event] = []
        lines: list[tuple[str | None, str, str]] = [
            (key, line, "info") for key, line in checkpoint.logs
        ]
        if last_log is not None:
            lines.append((None, *last_log))
        for key, line, level in lines:
            if self._add_line(job.id, line, level, None, now, key) is not None:
                events.append(_heard(self._lines[job.id][-1]))
        if checkpoint.artifact is not None:
            self._put_artifact(job.id, checkpoint.artifact)
        if event is not None:
            events.append(event)
        self._publish(events)

    def _add_line(
        self,
        job_id: str,
        message: str,
        level: str,
        metadata: dict[str, Any] | None,
        now: datetime,
        step_key: str | None,
    ) -> LogLine | None:
        """A log line; None when its step wrote one before."""
        if step_key is not None:
            if step_key in self._step_keys[job_id]:
                return None
            self._step_keys[job_id].add(step_key)
        self._last_line_id += 1
        line = LogLine(self._last_line_id, job_id, level, message, copy.deepcopy(metadata), now)
        self._lines[job_id].append(line)
        return line

    def _put_artifact(self, job_id: str, artifact: NewArtifact) -> None:
        """Stored under its name; written again, it is replaced and keeps its id."""
        before = self._artifacts[job_id].get(artifact.filename)
        self._artifacts[job_id][artifact.filename] = StoredFile(
            id=before.id if before is not None else str(uuid.uuid4()),
            job_id=job_id,
            filename=artifact.filename,
            mime_type=artifact.mime_type,
            size_bytes=len(artifact.content),
            created_at=artifact.created_at,
            content=artifact.content,
        )

    def _publish(self, events: list[Event]) -> None:
        for kind, payload in events:
            for listener in list(self._listeners):
                listener(kind, payload)


class MemoryJobLogs(JobLogStore):
    """``JobLogStore`` over the twin's lines (``MemoryJobStore.logs``)."""

    def __init__(self, store: MemoryJobStore) -> None:
        self._store = store

    async def add(
        self,
        job_id: str,
        message: str,
        *,
        level: str = "info",
        metadata: dict[str, Any] | None = None,
        claim: Claim | None = None,
        step_key: str | None = None,
    ) -> bool:
        store = self._store
        if claim is not None:
            store._checkpoint(claim, NO_CHECKPOINT, {})
        elif job_id not in store._jobs:
            raise JobNotFound(job_id)
        line = store._add_line(job_id, message, level, metadata, store.clock(), step_key)
        if line is None:
            return False
        store._publish([_heard(line)])
        return True

    async def page(
        self, job_id: str, *, after_id: int = 0, limit: int = 100, offset: int = 0
    ) -> list[LogLine]:
        lines = [line for line in self._store._lines.get(job_id, []) if line.id > after_id]
        return lines[offset : offset + limit]

    async def step_keys(self, job_id: str) -> set[str]:
        return set(self._store._step_keys.get(job_id, set()))


def _heard(line: LogLine) -> Event:
    return (
        EventType.JOB_LOG,
        {"jobId": line.job_id, "id": line.id, "level": line.level, "message": line.message},
    )
