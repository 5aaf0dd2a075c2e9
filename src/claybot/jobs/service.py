"""What the doors do with jobs: queue one, answer and cancel it, keep its uploads, hand
out its artifacts, follow its log, and report the workers and the numbers.

The job API (``api/jobs``) and the dashboard's Jobs pages (``web/job_pages.py``) both
act through this service, so the two cannot drift: the same checks on an upload, the
same answer text for a plan, the same end to a followed log. Each door reads its
request and shapes its answer; who sees a job (``Owner``) is the door's to say.

No SQLAlchemy here: the job database (which loads it) is reached through ``database``
once the engine's database is open, never at boot.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, get_args

from claybot.jobs.model import (
    MAX_MIME_TYPE_CHARS,
    TERMINAL,
    Job,
    JobStatus,
    LogLine,
    NewJob,
    Owner,
    RespondAction,
    StoredFile,
    WorkerHealthName,
    WorkerStatus,
    response_text,
    worker_health,
)
from claybot.jobs.registry_model import Match, NewServer, RegisteredServer
from claybot.kernel.errors import ClayError, InvalidInput

if TYPE_CHECKING:  # the database modules load SQLAlchemy: not at boot
    from claybot.jobs.database import JobDatabase
    from claybot.jobs.worker_rows import WorkerRow

__all__ = [
    "Download",
    "JobMetrics",
    "JobService",
    "LogEnd",
    "ServerUnreachable",
    "Upload",
    "WorkerView",
]

UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9.-]")
FOLLOW_POLL_S = 0.5  # a job another process runs is followed by reading its log this often
FOLLOW_PAGE = 1000  # log lines read at once while following


class ServerUnreachable(ClayError):
    code = "MCP_UNAVAILABLE"
    status = 502


class Upload(Protocol):
    """An uploaded file as both doors receive it (FastAPI's and Starlette's
    ``UploadFile`` alike)."""

    @property
    def filename(self) -> str | None: ...

    @property
    def content_type(self) -> str | None: ...

    async def read(self, size: int = -1) -> bytes: ...


@dataclass(frozen=True)
class Download:
    """An artifact to hand out as an attachment: its name made safe for a header."""

    filename: str
    content: bytes
    mime_type: str


@dataclass(frozen=True)
class LogEnd:
    """The job ended: a followed log says so last."""

    status: JobStatus


@dataclass(frozen=True)
class WorkerView:
    """A worker, and how long ago it was last heard from."""

    row: WorkerRow
    age_s: float
    health: WorkerHealthName


@dataclass(frozen=True)
class JobMetrics:
    """Jobs, workers and MCP servers in numbers (every status counted, 0 included)."""

    jobs_by_status: dict[str, int]
    workers_by_status: dict[WorkerStatus, int]
    created_last_hour: int
    completed_last_hour: int
    servers: int
    verified_servers: int
    at: datetime


def safe_name(filename: str, default: str) -> str:
    """A file's last path part, with anything but letters, digits, dots and dashes
    replaced (it travels in a header and into a path)."""
    return UNSAFE_NAME.sub("_", filename.rsplit("/", 1)[-1]) or default


class JobService:
    def __init__(
        self,
        database: Callable[[], Awaitable[JobDatabase]],
        workroot: Path,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``database``: the job database, once open (StoreError if it cannot be);
        ``workroot``: where jobs' directories and the MCP servers' logs are."""
        self._database = database
        self._workroot = workroot
        self._clock = clock

    # -- a job's life --------------------------------------------------------------------

    async def queue(self, new: NewJob) -> Job:
        """A new queued job."""
        return await (await self._database()).jobs.create(new)

    async def page(
        self, owner: Owner, *, status: JobStatus | None, limit: int, offset: int
    ) -> tuple[list[Job], int]:
        """The jobs ``owner`` sees, newest first, and how many there are."""
        db = await self._database()
        return await db.jobs.page(owner, status=status, limit=limit, offset=offset)

    async def counts(self, owner: Owner) -> dict[str, int]:
        """The jobs ``owner`` sees, by status."""
        return await (await self._database()).jobs.counts(owner)

    async def job(self, job_id: str, owner: Owner) -> Job:
        """The job, if ``owner`` sees it (JobNotFound: another's is as unknown as none)."""
        return await (await self._database()).jobs.get(job_id, owner)

    async def artifacts(self, job_id: str) -> list[StoredFile]:
        """A job's artifacts, without their content."""
        return await (await self._database()).files.artifacts(job_id)

    async def respond(
        self,
        job_id: str,
        action: RespondAction,
        answer: str,
        edited_plan: str | None,
        owner: Owner,
    ) -> tuple[Job, str]:
        """Answer a waiting job: the job, queued again, and the text its model reads."""
        if action in ("reject", "respond") and not answer:
            raise InvalidInput(f"{action} needs an answer", field="answer")
        text = response_text(action, answer, edited_plan)
        db = await self._database()
        job = await db.jobs.respond(job_id, text, owner)
        await db.logs.add(job.id, f"User responded ({action})")
        return job, text

    async def cancel(self, job_id: str, owner: Owner) -> Job:
        """Cancel a job (a running one stops within seconds)."""
        return await (await self._database()).jobs.cancel(job_id, owner)

    # -- files ---------------------------------------------------------------------------

    async def store_upload(
        self, file: Upload, *, owner: str | None, viewer: Owner, job_id: str | None = None
    ) -> StoredFile:
        """An uploaded file, kept as an attachment (``owner``: the key uploading it;
        ``job_id``: one of the jobs ``viewer`` sees, else it waits for the next)."""
        db = await self._database()
        cap = db.tables.max_file_bytes
        content = await file.read(cap + 1)
        if len(content) > cap:
            raise InvalidInput(
                f"the file is over {cap} bytes", field="file", code="FILE_TOO_LARGE", status=413
            )
        name = safe_name(file.filename or "upload", "upload")[:255]
        mime_type = file.content_type or ""
        # PostgreSQL refused both at the column ("value too long", NUL), answered as a 503.
        if len(mime_type) > MAX_MIME_TYPE_CHARS or "\x00" in mime_type:
            raise InvalidInput(
                f"the file's content type is over {MAX_MIME_TYPE_CHARS} characters or holds NUL",
                field="file",
            )
        return await db.files.add_attachment(
            name, content, file.content_type, owner=owner, viewer=viewer, job_id=job_id
        )

    async def download(self, job_id: str, artifact_id: str, owner: Owner) -> Download:
        """One artifact of a job ``owner`` sees, with its content."""
        db = await self._database()
        job = await db.jobs.get(job_id, owner)
        artifact = await db.files.artifact(job.id, artifact_id)
        return Download(
            filename=safe_name(artifact.filename, "artifact"),
            content=artifact.content or b"",
            mime_type=artifact.mime_type or "application/octet-stream",
        )

    # -- the log -------------------------------------------------------------------------

    async def log(self, job_id: str, *, after: int, limit: int, offset: int = 0) -> list[LogLine]:
        """A page of a job's log, oldest first (the caller has checked who sees it)."""
        db = await self._database()
        return await db.logs.page(job_id, after_id=after, limit=limit, offset=offset)

    async def follow_log(self, job_id: str, after: int) -> AsyncGenerator[LogLine | LogEnd, None]:
        """Every line of a job's log after ``after``, then new ones as they come, then
        ``LogEnd`` once the job has ended. Woken by this engine's writes; lines another
        process writes are read every ``FOLLOW_POLL_S``."""
        db = await self._database()
        news = asyncio.Event()

        def heard(kind: str, payload: dict[str, object]) -> None:
            if payload.get("jobId") == job_id:
                news.set()

        unsubscribe = db.tables.subscribe(heard)
        try:
            while True:
                news.clear()
                for line in await db.logs.page(job_id, after_id=after, limit=FOLLOW_PAGE):
                    after = line.id
                    yield line
                job = await db.jobs.get(job_id)
                if job.status in TERMINAL:
                    yield LogEnd(job.status)
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FOLLOW_POLL_S):
                        await news.wait()
        finally:
            unsubscribe()

    # -- workers and numbers -------------------------------------------------------------

    async def workers(self, status: WorkerStatus | None = None) -> list[WorkerView]:
        """The workers (of ``status``), each with its health by the database's clock."""
        db = await self._database()
        now = db.tables.clock()
        views = []
        for row in await db.workers.listing(status):
            age = (now - row.last_heartbeat).total_seconds()
            views.append(WorkerView(row, age, worker_health(row.status, age)))
        return views

    async def metrics(self) -> JobMetrics:
        db = await self._database()
        jobs = dict.fromkeys((status.value for status in JobStatus), 0)
        jobs.update(await db.jobs.counts())
        workers: dict[WorkerStatus, int] = dict.fromkeys(get_args(WorkerStatus), 0)
        for row in await db.workers.listing():
            workers[row.status] += 1
        servers, verified = await db.registry.counts()
        now = self._clock()
        activity = await db.jobs.activity_since(now - timedelta(hours=1))
        return JobMetrics(
            jobs_by_status=jobs,
            workers_by_status=workers,
            created_last_hour=activity["created"],
            completed_last_hour=activity["completed"],
            servers=servers,
            verified_servers=verified,
            at=now,
        )

    # -- the MCP server registry ---------------------------------------------------------

    async def servers(
        self, *, verified_only: bool, limit: int, offset: int
    ) -> tuple[list[RegisteredServer], int]:
        db = await self._database()
        return await db.registry.listing(verified_only=verified_only, limit=limit, offset=offset)

    async def register_server(self, new: NewServer) -> RegisteredServer:
        """Store a server, unverified: no job sees it until an admin verifies it."""
        return await (await self._database()).registry.register(new)

    async def discover(self, task: str, *, limit: int, threshold: float) -> list[Match]:
        """Verified servers that fit a task, best first."""
        db = await self._database()
        return await db.registry.search(task, limit=limit, threshold=threshold)

    async def verify_server(self, server_id: str, verified_by: str) -> RegisteredServer:
        """Connect to a server, record the tools it lists and mark it verified
        (ServerUnreachable if it cannot be reached)."""
        # Imported here: the MCP SDK and the registry load at the first verification.
        from claybot.jobs.mcp_servers import list_tools, load_sdk

        await load_sdk()
        from claybot.mcp_client.connection import McpServerError

        db = await self._database()
        server = await db.registry.get(server_id)
        try:
            tools = await list_tools(server, self._workroot / ".mcp")
        except McpServerError as exc:
            raise ServerUnreachable(
                f"MCP server {server.name!r} could not be reached: {exc}"
            ) from exc
        return await db.registry.mark_verified(server.id, tools, verified_by)
