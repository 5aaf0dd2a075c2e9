"""Seed 002's job API: bodies and answers, with the seed's field names (snake_case).

Answers carry no ``ok`` field (the seed's never did); times are ISO 8601 in UTC.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from datetime import datetime
from typing import Annotated, Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, model_validator
from pydantic_core import core_schema
from starlette.responses import Response

from claybot.db.keys import MAX_OWNER_EMAIL_CHARS, ApiKeyRecord, ScopeName
from claybot.jobs.model import (
    HitlMode,
    Job,
    JobStatus,
    LogLine,
    NewJob,
    StoredFile,
    WorkerHealthName,
    WorkerStatus,
)
from claybot.jobs.service import Download, JobMetrics, LogEnd, WorkerView
from claybot.kernel.sse import LF, sse_frame
from claybot.wire.base import Answer
from claybot.wire.bodies import JSON_INTEGER, NO_NUL

JobStatusName = Literal["queued", "running", "completed", "failed", "waiting_for_user", "cancelled"]


class _Body(BaseModel):
    # JSON types are strict: `0` is no boolean, `"5"` no number.
    model_config = ConfigDict(extra="forbid", strict=True)


HitlModeName = Literal["plan_approval", "auto_execute", "always_ask"]
# What each action needs, in the document too (so a generated client knows).
RESPOND_RULE: list[Any] = [
    {"properties": {"action": {"const": "approve"}}, "required": ["action"]},
    {
        "properties": {
            "action": {"const": "edit"},
            "editedPlan": {"type": "string", "minLength": 1},
        },
        "required": ["action", "editedPlan"],
    },
    {
        "properties": {
            "action": {"enum": ["reject", "respond"]},
            "answer": {"type": "string", "minLength": 1},
        },
        "required": ["answer"],
    },
]


AttachmentId = Annotated[str, Field(max_length=36, pattern=NO_NUL)]
JS_SAFE_INTEGER = 2**53 - 1  # the largest integer a JavaScript client holds exactly
# Where ClayBot keeps an upload, as ``POST /jobs/upload`` names it; the id is inside.
STORAGE_PATH = r"^attachments/unattached/([0-9a-f-]{36})/[^\x00/]+$"


class AttachmentRef(_Body):
    """An upload as seed 002's clients name it in a new job: the upload's answer, sent
    back whole (its ``id``, or its ``storage_path``, says which)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "anyOf": [
                {"properties": {"id": {"type": "string"}}, "required": ["id"]},
                {"properties": {"storage_path": {"type": "string"}}, "required": ["storage_path"]},
            ]
        },
    )

    id: AttachmentId | None = None
    filename: str | None = Field(default=None, max_length=255, pattern=NO_NUL)
    storage_path: str | None = Field(default=None, max_length=400, pattern=STORAGE_PATH)
    public_url: str | None = Field(default=None, max_length=2000, pattern=NO_NUL)
    mime_type: str | None = Field(default=None, max_length=200, pattern=NO_NUL)
    size_bytes: Annotated[int, Field(ge=0, le=JS_SAFE_INTEGER), JSON_INTEGER] | None = None

    @model_validator(mode="after")
    def _named(self) -> AttachmentRef:
        if self.id is None and self.storage_path is None:
            raise ValueError("an attachment needs the 'id' or 'storage_path' of an upload")
        return self

    @property
    def upload_id(self) -> str:
        if self.id is not None:
            return self.id
        found = re.match(STORAGE_PATH, self.storage_path or "")
        assert found is not None  # the field's pattern
        return found.group(1)


class _OneError:
    """A union refused as one error at its own place (``attachments.0``), not one per
    member under pydantic's names for them (``attachments.0.constrained-str``)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        schema = handler(source)
        assert schema["type"] == "union"
        union = cast(core_schema.UnionSchema, schema)
        union["custom_error_type"] = "attachment_invalid"
        union["custom_error_message"] = self.message
        return union


Attachment = Annotated[
    AttachmentId | AttachmentRef,
    _OneError(
        "an upload's id (36 characters at most, no NUL), or its answer from POST "
        "/api/v1/jobs/upload (naming its id or storage_path)"
    ),
]


class CreateJob(_Body):
    task: str = Field(min_length=1, max_length=10_000, pattern=NO_NUL)
    priority: Annotated[int, Field(ge=0, le=100), JSON_INTEGER] = 0
    timeout_seconds: Annotated[int, Field(ge=30, le=3600), JSON_INTEGER] = 300
    model: str | None = Field(default=None, max_length=200, pattern=NO_NUL)
    hitl_mode: HitlModeName = "plan_approval"
    allow_network: bool = Field(default=False, description="run_python may reach the network")
    attachments: list[Attachment] = Field(
        default_factory=list,
        max_length=50,
        description="Uploads (POST /jobs/upload): their ids, or their answers as they came",
    )

    @property
    def attachment_ids(self) -> tuple[str, ...]:
        return tuple(item if isinstance(item, str) else item.upload_id for item in self.attachments)

    def new_job(self, creator: str | None) -> NewJob:
        """The job this asks for; ``creator``: the key that made it (None: the engine's
        owner). The dashboard's form is checked as this body, and queued the same way."""
        return NewJob(
            task=self.task,
            priority=self.priority,
            timeout_seconds=self.timeout_seconds,
            model=self.model,
            hitl_mode=HitlMode(self.hitl_mode),
            allow_network=self.allow_network,
            api_key_id=creator,
            attachment_ids=self.attachment_ids,
        )


class RespondToJob(_Body):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"anyOf": RESPOND_RULE}
    )

    answer: str = Field(default="", max_length=10_000, pattern=NO_NUL)
    editedPlan: str | None = Field(default=None, max_length=50_000, pattern=NO_NUL)
    action: Literal["approve", "reject", "edit", "respond"] = "respond"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


class JobCreated(Answer):
    id: str
    status: JobStatusName
    task: str
    created_at: str


class JobSummary(Answer):
    id: str
    task: str
    status: JobStatusName
    priority: int
    created_at: str
    started_at: str | None
    completed_at: str | None
    agent_question: str | None

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        return cls(
            id=job.id,
            task=job.task,
            status=job.status.value,
            priority=job.priority,
            created_at=job.created_at.isoformat(),
            started_at=_iso(job.started_at),
            completed_at=_iso(job.completed_at),
            agent_question=job.agent_question,
        )


class JobPage(Answer):
    jobs: list[JobSummary]
    count: int = Field(description="Jobs matching, over all pages")
    offset: int
    limit: int


class ArtifactInfo(Answer):
    id: str
    filename: str
    mime_type: str | None
    url: str = Field(
        description="Where to download it: with the same key, or with none for 10 to 15 "
        "minutes (it is signed, so a browser's plain link opens it)"
    )
    size_bytes: int
    created_at: str

    @classmethod
    def of(cls, stored: StoredFile, url: str) -> ArtifactInfo:
        return cls(
            id=stored.id,
            filename=stored.filename,
            mime_type=stored.mime_type,
            url=url,
            size_bytes=stored.size_bytes,
            created_at=stored.created_at.isoformat(),
        )


class JobDetail(Answer):
    id: str
    task: str
    status: JobStatusName
    priority: int
    timeout_seconds: int
    model: str | None
    hitl_mode: str
    allow_network: bool
    result: str | None
    error_message: str | None
    agent_question: str | None
    user_answer: str | None
    retry_count: int
    max_retries: int
    worker_id: str | None
    cancel_requested: bool
    tools_discovered: list[str] | None
    execution_state: dict[str, Any] | None
    created_at: str
    started_at: str | None
    paused_at: str | None
    completed_at: str | None
    artifacts: list[ArtifactInfo]

    @classmethod
    def of(cls, job: Job, artifacts: list[ArtifactInfo]) -> JobDetail:
        return cls(
            id=job.id,
            task=job.task,
            status=job.status.value,
            priority=job.priority,
            timeout_seconds=job.timeout_seconds,
            model=job.model,
            hitl_mode=job.hitl_mode.value,
            allow_network=job.allow_network,
            result=job.result,
            error_message=job.error_message,
            agent_question=job.agent_question,
            user_answer=job.user_answer,
            retry_count=job.retry_count,
            max_retries=job.max_retries,
            worker_id=job.worker_id,
            cancel_requested=job.cancel_requested,
            tools_discovered=job.tools_discovered,
            execution_state=job.execution_state,
            created_at=job.created_at.isoformat(),
            started_at=_iso(job.started_at),
            paused_at=_iso(job.paused_at),
            completed_at=_iso(job.completed_at),
            artifacts=artifacts,
        )


class Responded(Answer):
    id: str
    status: JobStatusName
    message: str = Field(description="The text the job's model reads as the answer")


class LogEntry(Answer):
    id: int
    level: Literal["debug", "info", "warn", "error"]
    message: str
    metadata: dict[str, Any] | None
    timestamp: str

    @classmethod
    def of(cls, line: LogLine) -> LogEntry:
        return cls(
            id=line.id,
            level=line.level,  # type: ignore[arg-type]
            message=line.message,
            metadata=line.metadata,
            timestamp=line.timestamp.isoformat(),
        )


class LogPage(Answer):
    logs: list[LogEntry]
    count: int = Field(description="Lines in this page")
    offset: int
    limit: int


class ArtifactList(Answer):
    artifacts: list[ArtifactInfo]
    count: int


class Uploaded(Answer):
    id: str = Field(description="Name it in a job's `attachments`")
    filename: str
    mime_type: str | None
    size_bytes: int
    storage_path: str
    public_url: None = Field(description="Uploads are never public (seed 002 had a bucket)")

    @classmethod
    def of(cls, stored: StoredFile) -> Uploaded:
        return cls(
            id=stored.id,
            filename=stored.filename,
            mime_type=stored.mime_type,
            size_bytes=stored.size_bytes,
            storage_path=stored.storage_path or "",
            public_url=None,
        )


class Health(Answer):
    status: Literal["healthy"]
    timestamp: str
    version: str


class WorkerHealth(Answer):
    id: str
    hostname: str
    status: WorkerStatus
    health: WorkerHealthName
    active_jobs: int
    version: str
    last_heartbeat: str
    seconds_since_heartbeat: int

    @classmethod
    def of(cls, view: WorkerView) -> WorkerHealth:
        row = view.row
        return cls(
            id=row.id,
            hostname=row.hostname,
            status=row.status,
            health=view.health,
            active_jobs=row.active_jobs,
            version=row.version,
            last_heartbeat=row.last_heartbeat.isoformat(),
            seconds_since_heartbeat=round(view.age_s),
        )


class WorkerList(Answer):
    workers: list[WorkerHealth]
    summary: dict[str, int] = Field(
        description="Workers by health: `healthy`, `warning`, `dead` and `stopped`"
    )

    @classmethod
    def of(cls, views: list[WorkerView]) -> WorkerList:
        summary = dict.fromkeys(get_args(WorkerHealthName), 0)
        for view in views:
            summary[view.health] += 1
        return cls(workers=[WorkerHealth.of(view) for view in views], summary=summary)


class JobActivity(Answer):
    created: int
    completed: int


class JobCounts(Answer):
    by_status: dict[JobStatusName, int] = Field(description="Every status, 0 included")
    total: int
    last_hour: JobActivity


class WorkerCounts(Answer):
    by_status: dict[WorkerStatus, int] = Field(description="Every status, 0 included")
    total: int


class KeyCounts(Answer):
    total: int
    active: int


class ServerCounts(Answer):
    total: int
    verified: int


class Metrics(Answer):
    """Seed 002's numbers, in its shape; ``jobs_last_hour`` and ``keys`` are ClayBot's
    earlier names for ``jobs.last_hour`` and ``api_keys``, kept for its clients."""

    jobs: JobCounts
    workers: WorkerCounts
    agents: ServerCounts = Field(description="MCP servers")
    api_keys: KeyCounts
    timestamp: str
    jobs_last_hour: JobActivity
    keys: KeyCounts

    @classmethod
    def of(cls, numbers: JobMetrics, keys: list[ApiKeyRecord]) -> Metrics:
        jobs: dict[JobStatusName, int] = dict.fromkeys(get_args(JobStatusName), 0)
        jobs.update(numbers.jobs_by_status)  # type: ignore[arg-type]  # the statuses above
        counted = KeyCounts(total=len(keys), active=sum(1 for key in keys if not key.revoked))
        last_hour = JobActivity(
            created=numbers.created_last_hour, completed=numbers.completed_last_hour
        )
        workers = numbers.workers_by_status
        return cls(
            jobs=JobCounts(by_status=jobs, total=sum(jobs.values()), last_hour=last_hour),
            workers=WorkerCounts(by_status=workers, total=sum(workers.values())),
            agents=ServerCounts(total=numbers.servers, verified=numbers.verified_servers),
            api_keys=counted,
            timestamp=numbers.at.isoformat(),
            jobs_last_hour=last_hour,
            keys=counted,
        )


# -- API keys (seed 002's names; ``/v1/engine/keys`` has the engine's own) ------------------
DEFAULT_SCOPES: tuple[ScopeName, ...] = ("jobs:write", "jobs:read")  # seed 002's
EMAIL = r"^[^@\s\x00]+@[^@\s\x00]+$"


class NewKey(_Body):
    name: str = Field(min_length=1, max_length=128, pattern=NO_NUL)
    owner_email: str | None = Field(
        default=None, max_length=MAX_OWNER_EMAIL_CHARS, pattern=EMAIL, description="Whose key"
    )
    scopes: list[ScopeName] = Field(default_factory=lambda: list(DEFAULT_SCOPES), min_length=1)
    rate_limit_rpm: Annotated[int, Field(ge=1, le=10_000), JSON_INTEGER] = 60


class JobsApiKey(Answer):
    id: str
    key_prefix: str = Field(description="The key's first characters, to tell keys apart")
    name: str
    owner_email: str | None
    scopes: list[str]
    rate_limit_rpm: int
    is_active: bool = Field(description="False once revoked")
    created_at: str
    last_used_at: str | None
    total_requests: int
    revoked_at: str | None

    @classmethod
    def of(cls, record: ApiKeyRecord) -> JobsApiKey:
        return cls(
            id=record.id,
            key_prefix=record.prefix,
            name=record.name,
            owner_email=record.owner_email,
            scopes=list(record.scopes),
            rate_limit_rpm=record.rate_limit_rpm,
            is_active=not record.revoked,
            created_at=record.created_at.isoformat(),
            last_used_at=_iso(record.last_used_at),
            total_requests=record.usage_count,
            revoked_at=_iso(record.revoked_at),
        )


class KeyCreated(Answer):
    id: str
    key: str = Field(description="Shown this once; only its hash is kept")
    message: str


class KeyList(Answer):
    keys: list[JobsApiKey]
    count: int


def status_name(status: JobStatus) -> JobStatusName:
    return status.value


async def log_events(followed: AsyncGenerator[LogLine | LogEnd, None]) -> AsyncIterator[bytes]:
    """A followed log as server-sent events: each line a ``log`` event with its id (so a
    reconnecting reader resumes after it), then an ``end`` event with the job's status.
    A reader that goes away closes ``followed`` at once (it stops listening then)."""
    async with aclosing(followed):
        async for item in followed:
            if isinstance(item, LogEnd):
                end = json.dumps({"status": item.status.value}).encode()
                yield sse_frame(end, event="end", eol=LF)
            else:
                entry = LogEntry.of(item).model_dump_json().encode()
                yield sse_frame(entry, event="log", id=item.id, eol=LF)


def download_response(download: Download) -> Response:
    """An artifact as a download, never shown inline: it is a job's output."""
    return Response(
        download.content,
        media_type=download.mime_type,
        headers={
            "Content-Disposition": f'attachment; filename="{download.filename}"',
            "X-Content-Type-Options": "nosniff",
        },
    )
