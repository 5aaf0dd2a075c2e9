"""Jobs (seed 002): their statuses, the moves between them, and the texts a response becomes.

A job is ``queued`` until a worker claims it (``running``); it ends ``completed``,
``failed`` or ``cancelled``, or waits for a person (``waiting_for_user``) and is
queued again when they respond. A running job whose worker is lost goes back to
``queued``. Every other move is refused (``InvalidJobState``), so a job that ended
stays ended whatever arrives late.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from claybot.kernel.errors import Conflict, InvalidInput, NotFound


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    WAITING_FOR_USER = "waiting_for_user"
    CANCELLED = "cancelled"


TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})

# A worker's, in the ``workers`` table (``worker_rows.py`` says what each means).
WorkerStatus = Literal["active", "draining", "stopped", "dead"]
# Seed 002's three, and ``stopped``: a worker that stopped cleanly (seed 002 said dead).
WorkerHealthName = Literal["healthy", "warning", "dead", "stopped"]
HEALTHY_S = 60  # a worker heard from this recently is healthy; twice as long, a warning
WARNING_S = 120
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED}),
    JobStatus.RUNNING: frozenset(
        {
            JobStatus.COMPLETED,
            JobStatus.FAILED,
            JobStatus.WAITING_FOR_USER,
            JobStatus.CANCELLED,
            JobStatus.QUEUED,  # its worker was lost, or drained
        }
    ),
    JobStatus.WAITING_FOR_USER: frozenset({JobStatus.QUEUED, JobStatus.CANCELLED}),
    JobStatus.COMPLETED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}


class HitlMode(StrEnum):
    PLAN_APPROVAL = "plan_approval"  # the default: a plan is approved before anything runs
    AUTO_EXECUTE = "auto_execute"
    ALWAYS_ASK = "always_ask"


RespondAction = Literal["approve", "reject", "edit", "respond"]


def worker_health(status: WorkerStatus, age_s: float) -> WorkerHealthName:
    """Seed 002's health by the time since the worker was last heard from; a worker that
    is gone is its status (seed 002 had no ``stopped``: it listed those as dead)."""
    if status in ("stopped", "dead"):
        return status
    if age_s < HEALTHY_S:
        return "healthy"
    return "warning" if age_s < WARNING_S else "dead"


class JobNotFound(NotFound):
    code = "not_found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r}")


class InvalidJobState(Conflict):
    """Seed 002 answers a move the job's status does not allow with 400 INVALID_STATE."""

    code = "INVALID_STATE"
    status = 400


class LeaseLost(Exception):
    """A worker's write found the job no longer its own (requeued, cancelled, or claimed
    again by another worker): the write was not made, and the worker drops the job."""


def check_transition(current: JobStatus, wanted: JobStatus) -> None:
    if wanted not in TRANSITIONS[current]:
        raise InvalidJobState(f"a {current.value} job cannot become {wanted.value}")


def response_text(action: RespondAction, answer: str, edited_plan: str | None) -> str:
    """What the model reads as the answer to its question (seed 002's table, as the
    original engine wrote it)."""
    if action == "approve":
        return f"[PLAN APPROVED] {answer or 'User approved the plan.'}"
    if action == "reject":
        return f"[PLAN REJECTED] {answer}"
    if action == "edit":
        if not edited_plan:
            raise InvalidInput("an edit needs editedPlan", field="editedPlan")
        return (
            f"[PLAN EDITED] User modified the plan:\n\n{edited_plan}\n\n"
            f"Additional feedback: {answer or 'None'}"
        )
    return answer


@dataclass(frozen=True)
class Job:
    """One row of ``job_queue`` (the fields the engine reads; the API shows them by the
    seed's names)."""

    id: str
    task: str
    status: JobStatus
    priority: int
    timeout_seconds: int
    model: str | None
    hitl_mode: HitlMode
    allow_network: bool
    worker_id: str | None
    attempt: int
    retry_count: int
    max_retries: int
    api_key_id: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    paused_at: datetime | None = None
    completed_at: datetime | None = None
    result: str | None = None
    error_message: str | None = None
    agent_question: str | None = None
    user_answer: str | None = None
    cancel_requested: bool = False
    tools_discovered: list[str] | None = None
    execution_state: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class Claim:
    """A worker's hold on a running job: every write it makes names both."""

    job: Job
    worker_id: str
    attempt: int
    attachments: tuple[str, ...] = ()  # the names of its uploads, as it was claimed


@dataclass(frozen=True)
class NewJob:
    task: str
    priority: int = 0
    timeout_seconds: int = 300
    model: str | None = None
    hitl_mode: HitlMode = HitlMode.PLAN_APPROVAL
    allow_network: bool = False
    max_retries: int = 3
    api_key_id: str | None = None
    attachment_ids: tuple[str, ...] = ()


# Who may see a job: a key id (its own jobs only), or EVERYONE (the socket's owner, admin keys).
EVERYONE: None = None
Owner = str | None


def visible_to(key_id: str | None, scopes: Iterable[str]) -> Owner:
    """Whose jobs a caller sees: every job for the engine's owner (no key) and for an
    ``admin`` key, else only those its key created. The API and the dashboard both ask."""
    if key_id is None or "admin" in scopes:
        return EVERYONE
    return key_id


MAX_MIME_TYPE_CHARS = 200  # the width of the files' mime_type columns


@dataclass(frozen=True)
class StoredFile:
    """An artifact (written by a job) or an attachment (uploaded for one)."""

    id: str
    job_id: str | None
    filename: str
    mime_type: str | None
    size_bytes: int
    created_at: datetime
    content: bytes | None = None  # only when asked for
    storage_path: str | None = None  # an attachment's name in seed 002's terms


@dataclass(frozen=True)
class LogLine:
    id: int
    job_id: str
    level: str
    message: str
    metadata: dict[str, Any] | None
    timestamp: datetime
