"""The job store as the rest of ClayBot sees it: the workers, the runner, the jobs'
tools and the HTTP routes call only what these Protocols name.

Two implementations hold to them: ``SqlJobStore`` (``store.py``) with ``JobLogs``
(``logs.py``) over SQLite or PostgreSQL, and ``MemoryJobStore`` (``memory_store.py``),
the twin that tests and demos run on. One contract suite
(``tests/jobs/contract/``) runs the same tests against each, so the twin cannot drift
from the database: what a docstring here promises, every implementation does.

The promises, in short (``model.py`` has the statuses and the moves between them):

- A claim is a lease: it bumps the job's ``attempt``, and every write under it
  (``append_records``, ``finish``, ``pause``, ``record_discovered``, ``release``, a
  log line with ``claim``) is fenced by (worker, attempt, running). A fence that does
  not hold raises ``LeaseLost`` and writes nothing; one that holds extends the lease.
- A job another key created is as unknown to a key as a missing one (``JobNotFound``).
- A move the job's status does not allow raises ``InvalidJobState`` and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from claybot.agents.records import HistoryRecord
from claybot.jobs.model import EVERYONE, Claim, Job, JobStatus, LogLine, NewJob, Owner


@dataclass(frozen=True)
class NewArtifact:
    filename: str
    mime_type: str | None
    content: bytes
    created_at: datetime


@dataclass(frozen=True)
class Checkpoint:
    """Records to append from ``first_seq``, (step key, line) log lines written with
    them, and the artifact a tool of the step wrote (``write_file``'s), if any."""

    first_seq: int
    records: Sequence[HistoryRecord]
    logs: Sequence[tuple[str, str]]
    artifact: NewArtifact | None = None


NO_CHECKPOINT = Checkpoint(0, (), ())


@dataclass(frozen=True)
class Renewal:
    cancelled: set[str]  # asked to stop: end them cancelled
    lost: set[str]  # no longer this worker's: write nothing more


@dataclass(frozen=True)
class Swept:
    requeued: list[str]
    failed: list[str]
    cancelled: list[str]


# Where a sweep takes a job, tried in this order: a cancel asked for wins over the
# retries left.
SWEPT_TO = (JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.QUEUED)
LOST_WORKER_ERROR = "its worker was lost and its retries are spent"


class JobStore(Protocol):
    """Jobs, their claims and their records (seed 002's ``job_queue`` and ``job_records``)."""

    # -- jobs ------------------------------------------------------------------------

    async def create(self, new: NewJob) -> Job:
        """A queued job, its first log line ("Job created") written with it. Its
        ``attachment_ids`` must be uploads of its own key not attached yet, else
        ``NotFound`` and nothing is written."""
        ...

    async def get(self, job_id: str, owner: Owner = EVERYONE) -> Job: ...

    async def page(
        self,
        owner: Owner = EVERYONE,
        *,
        status: JobStatus | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[Job], int]:
        """The jobs ``owner`` sees (with ``status``), newest first; and how many there are."""
        ...

    async def respond(self, job_id: str, answer: str, owner: Owner = EVERYONE) -> Job:
        """A person answered the job's question: it is queued again with the answer."""
        ...

    async def cancel(self, job_id: str, owner: Owner = EVERYONE) -> Job:
        """Cancel a queued or waiting job at once; a running one is asked to stop (its
        worker sees the request at its next renewal and ends the job ``cancelled``)."""
        ...

    async def counts(self, owner: Owner = EVERYONE) -> dict[str, int]:
        """Jobs by status, of the jobs ``owner`` sees (statuses no job has are absent)."""
        ...

    async def activity_since(self, moment: datetime) -> dict[str, int]:
        """Jobs created and jobs completed since ``moment``."""
        ...

    async def delete(self, job_ids: Iterable[str]) -> None:
        """Forget the jobs, with their records and log lines."""
        ...

    # -- claims and leases -----------------------------------------------------------

    async def claim(self, worker_id: str) -> Claim | None:
        """The top queued job, now running under this worker; None when none is queued."""
        ...

    async def claim_many(self, worker_id: str, limit: int) -> list[Claim]:
        """Up to ``limit`` of the top queued jobs (priority, then age, then id), now
        running under this worker, in that order."""
        ...

    async def renew(self, worker_id: str, job_ids: Sequence[str]) -> Renewal:
        """Extend this worker's leases; which of its jobs were asked to cancel, and which
        it no longer holds."""
        ...

    async def sweep(self) -> Swept:
        """Jobs whose lease ran out: cancelled when a cancel was asked for, failed when
        their retries are spent, else requeued (``retry_count`` + 1)."""
        ...

    # -- a claimed job's records and writes (fenced) ---------------------------------

    async def records(self, job_id: str) -> list[HistoryRecord]:
        """The job's records, in their order: the agents' typed history records, as the
        turn loop wrote them (``jobs/transcript.py``). A row that is no record of a known
        type (a newer engine's) reads as a ``DamagedRecord`` in its place, so the records
        keep their numbers (``record_rows.py``)."""
        ...

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
        """Append records numbered from ``first_seq`` (the checkpoint after a step), with
        ``logs``, (step key, line) for the job's log (a line whose key was written
        before is not written again) and ``artifact``, the step's.

        Records already there under their numbers, the same (their JSON is), are
        skipped (a checkpoint sent again); a number taken by a different record means
        another writer got there first: ``LeaseLost``, and nothing is written."""
        ...

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
        (at level ``error`` when it failed), and ``checkpoint``: its last records,
        written with it."""
        ...

    async def pause(
        self, claim: Claim, question: str, state: dict[str, Any], *, log: str | None = None
    ) -> None:
        """The job asked a person: it waits, holding no worker (``log``: written with it)."""
        ...

    async def record_discovered(self, claim: Claim, packages: Sequence[str]) -> list[str]:
        """Add MCP servers (by package) to those the job found; all it found, in order."""
        ...

    async def release(self, claim: Claim) -> None:
        """Give a running job back to the queue: not a failure, its retries stay."""
        ...


class JobLogStore(Protocol):
    """A job's log (``job_logs``): what it did, in order, readable while it runs."""

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
        """Add a line; with ``step_key``, a line the same step wrote before is not
        written again (False). With ``claim`` the write is fenced."""
        ...

    async def page(
        self, job_id: str, *, after_id: int = 0, limit: int = 100, offset: int = 0
    ) -> list[LogLine]:
        """The job's lines after ``after_id``, oldest first (ids grow with each line)."""
        ...

    async def step_keys(self, job_id: str) -> set[str]:
        """The steps that already wrote their line (a resumed job skips them)."""
        ...


Clock = Callable[[], datetime]
# How long a claim holds without a renewal (a worker renews at a third of it).
DEFAULT_LEASE = timedelta(seconds=30)
# An event of this process's job store, heard once what it tells is committed:
# (``job.created``, ``job.status``, ``job.cancel_requested`` or ``job.log``, payload).
Listener = Callable[[str, dict[str, Any]], None]


class JobEvents(Protocol):
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Hear this process's committed changes; returns the unsubscribe call."""
        ...
