"""Seed 002's job API under ``/api/v1``: paths, fields and status codes as the seed has
them, so a client written against it works unchanged.

Who sees what: on TCP a key sees only the jobs it created (another key's job is
404, as unknown as a missing one) unless it has ``admin``; the Unix socket is the
owner's and sees every job. Scopes are checked by the TCP middleware
(``tcp_auth.required_scope``); errors here take the seed's shape
(``seed_errors.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated
from uuid import UUID

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import Response, StreamingResponse
from starlette import datastructures

from claybot import __version__
from claybot.api.bounds import INT64_MAX, Offset
from claybot.api.engine.routes import engine_of
from claybot.api.responses import seed_errors
from claybot.jobs.artifact_links import ArtifactLinks
from claybot.jobs.model import (
    EVERYONE,
    MAX_MIME_TYPE_CHARS,
    HitlMode,
    Job,
    JobStatus,
    NewJob,
    Owner,
    StoredFile,
    response_text,
    visible_to,
)
from claybot.kernel.errors import InvalidInput
from claybot.kernel.sse import LF, sse_frame
from claybot.wire.bodies import NO_NUL
from claybot.wire.jobs import (
    ArtifactInfo,
    ArtifactList,
    CreateJob,
    Health,
    JobCreated,
    JobDetail,
    JobPage,
    JobSummary,
    LogEntry,
    LogPage,
    Responded,
    RespondToJob,
    Uploaded,
    status_name,
)

if TYPE_CHECKING:  # the database modules load SQLAlchemy: not at boot
    from claybot.jobs.database import JobDatabase

router = APIRouter(
    prefix="/api/v1", tags=["jobs (seed 002)"], responses=seed_errors(400, 404, 413, 500, 503, 507)
)
UPLOAD_PATH = "/api/v1/jobs/upload"
UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9.-]")
FOLLOW_POLL_S = 0.5  # a job another process runs is followed by reading its log this often
TERMINAL = {JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED}


def key_id(request: Request) -> str | None:
    """The API key's id on TCP; None on the Unix socket (the owner)."""
    record = request.scope.get("state", {}).get("api_key")
    return None if record is None else str(record.id)


def viewer(request: Request) -> Owner:
    """Whose jobs this request may see: a key's own, or all (admin, the socket)."""
    record = request.scope.get("state", {}).get("api_key")
    if record is None:
        return EVERYONE
    return visible_to(str(record.id), record.scopes)


async def jobs_db(request: Request) -> JobDatabase:
    return await engine_of(request).jobs.database()


def artifact_links(request: Request) -> ArtifactLinks:
    links = request.app.state.artifact_links
    assert isinstance(links, ArtifactLinks)
    return links


def artifact_infos(request: Request, job_id: str, stored: list[StoredFile]) -> list[ArtifactInfo]:
    """A job's artifacts as the API lists them, each with its signed link."""
    links = artifact_links(request)
    return [ArtifactInfo.of(file, links.url(job_id, file.id)) for file in stored]


@router.get("/health", summary="Is the API up (no key needed)")
async def health() -> Health:
    return Health(status="healthy", timestamp=datetime.now(UTC).isoformat(), version=__version__)


# -- what the API and the dashboard's Jobs pages both do ---------------------------------


async def queue_job(db: JobDatabase, body: CreateJob, creator: str | None) -> Job:
    """A new queued job; ``creator``: the key that made it (None: the engine's owner)."""
    return await db.jobs.create(
        NewJob(
            task=body.task,
            priority=body.priority,
            timeout_seconds=body.timeout_seconds,
            model=body.model,
            hitl_mode=HitlMode(body.hitl_mode),
            allow_network=body.allow_network,
            api_key_id=creator,
            attachment_ids=body.attachment_ids,
        )
    )


async def respond_to(
    db: JobDatabase, job_id: str, body: RespondToJob, owner: Owner
) -> tuple[Job, str]:
    """Answer a waiting job: the job, queued again, and the text its model reads."""
    if body.action in ("reject", "respond") and not body.answer:
        raise InvalidInput(f"{body.action} needs an answer", field="answer")
    text = response_text(body.action, body.answer, body.editedPlan)
    job = await db.jobs.respond(job_id, text, owner)
    await db.logs.add(job.id, f"User responded ({body.action})")
    return job, text


async def store_upload(
    db: JobDatabase,
    file: datastructures.UploadFile,  # FastAPI's is one; the dashboard reads Starlette's
    *,
    owner: str | None,
    viewer: Owner,
    job_id: str | None = None,
) -> StoredFile:
    """An uploaded file, kept as an attachment (``owner``: the key uploading it)."""
    cap = db.tables.max_file_bytes
    content = await file.read(cap + 1)
    if len(content) > cap:
        raise InvalidInput(
            f"the file is over {cap} bytes", field="file", code="FILE_TOO_LARGE", status=413
        )
    name = UNSAFE_NAME.sub("_", (file.filename or "upload").rsplit("/", 1)[-1])[:255] or "upload"
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


async def artifact_download(
    db: JobDatabase, job_id: str, artifact_id: str, owner: Owner
) -> Response:
    """An artifact as a download (never shown inline: it is a job's output)."""
    job = await db.jobs.get(job_id, owner)
    artifact = await db.files.artifact(job.id, artifact_id)
    name = UNSAFE_NAME.sub("_", artifact.filename.rsplit("/", 1)[-1]) or "artifact"
    return Response(
        artifact.content or b"",
        media_type=artifact.mime_type or "application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Content-Type-Options": "nosniff",
        },
    )


async def follow_log(db: JobDatabase, job_id: str, after: int) -> AsyncIterator[bytes]:
    """A job's log as server-sent events: every line after ``after`` (each with its id,
    so a reconnecting reader resumes), then new ones as they come, until the job ends.
    Woken by this engine's writes; lines another process writes are read every half
    second."""
    news = asyncio.Event()

    def heard(kind: str, payload: dict[str, object]) -> None:
        if payload.get("jobId") == job_id:
            news.set()

    unsubscribe = db.tables.subscribe(heard)
    try:
        while True:
            news.clear()
            for line in await db.logs.page(job_id, after_id=after, limit=1000):
                after = line.id
                entry = LogEntry.of(line).model_dump_json().encode()
                yield sse_frame(entry, event="log", id=line.id, eol=LF)
            job = await db.jobs.get(job_id)
            if job.status in TERMINAL:
                end = json.dumps({"status": job.status.value}).encode()
                yield sse_frame(end, event="end", eol=LF)
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FOLLOW_POLL_S):
                    await news.wait()
    finally:
        unsubscribe()


# -- the routes ----------------------------------------------------------------------------


@router.post("/jobs", status_code=201, summary="Queue a job")
async def create_job(request: Request, body: CreateJob) -> JobCreated:
    job = await queue_job(await jobs_db(request), body, key_id(request))
    return JobCreated(
        id=job.id,
        status=status_name(job.status),
        task=job.task,
        created_at=job.created_at.isoformat(),
    )


@router.get("/jobs", summary="Jobs, newest first")
async def list_jobs(
    request: Request,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Offset = 0,
) -> JobPage:
    db = await jobs_db(request)
    jobs, count = await db.jobs.page(viewer(request), status=status, limit=limit, offset=offset)
    return JobPage(jobs=[JobSummary.of(j) for j in jobs], count=count, offset=offset, limit=limit)


@router.get("/jobs/{job_id:uuid}", summary="A job, with its artifacts")
async def get_job(request: Request, job_id: UUID) -> JobDetail:
    db = await jobs_db(request)
    job = await db.jobs.get(str(job_id), viewer(request))
    return JobDetail.of(job, artifact_infos(request, job.id, await db.files.artifacts(job.id)))


@router.post("/jobs/{job_id:uuid}/respond", summary="Answer a job that waits for you")
async def respond(request: Request, job_id: UUID, body: RespondToJob) -> Responded:
    job, text = await respond_to(await jobs_db(request), str(job_id), body, viewer(request))
    return Responded(id=job.id, status=status_name(job.status), message=text)


async def _cancel(request: Request, job_id: UUID) -> JobDetail:
    db = await jobs_db(request)
    job = await db.jobs.cancel(str(job_id), viewer(request))
    return JobDetail.of(job, artifact_infos(request, job.id, await db.files.artifacts(job.id)))


@router.post("/jobs/{job_id:uuid}/cancel", summary="Cancel a job (a running one within seconds)")
async def cancel_job(request: Request, job_id: UUID) -> JobDetail:
    return await _cancel(request, job_id)


@router.delete("/jobs/{job_id:uuid}", summary="Cancel a job (seed 002's way)")
async def delete_job(request: Request, job_id: UUID) -> JobDetail:
    return await _cancel(request, job_id)


@router.get(
    "/jobs/{job_id:uuid}/logs",
    summary="A job's log, oldest first; `follow=true` streams it (SSE) until the job ends",
    response_model=LogPage,
    responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}},
)
async def job_logs(
    request: Request,
    job_id: UUID,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
    after: Annotated[int, Query(ge=0, le=INT64_MAX, description="Only lines after this id")] = 0,
    follow: bool = False,
) -> LogPage | StreamingResponse:
    db = await jobs_db(request)
    job = await db.jobs.get(str(job_id), viewer(request))
    if follow or "text/event-stream" in request.headers.get("accept", ""):
        return StreamingResponse(follow_log(db, job.id, after), media_type="text/event-stream")
    lines = await db.logs.page(job.id, after_id=after, limit=limit, offset=offset)
    return LogPage(
        logs=[LogEntry.of(line) for line in lines], count=len(lines), offset=offset, limit=limit
    )


@router.get("/jobs/{job_id:uuid}/artifacts", summary="A job's artifacts")
async def list_artifacts(request: Request, job_id: UUID) -> ArtifactList:
    db = await jobs_db(request)
    job = await db.jobs.get(str(job_id), viewer(request))
    artifacts = artifact_infos(request, job.id, await db.files.artifacts(job.id))
    return ArtifactList(artifacts=artifacts, count=len(artifacts))


@router.get(
    "/jobs/{job_id:uuid}/artifacts/{artifact_id:uuid}",
    summary="Download an artifact",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}},
)
async def download_artifact(request: Request, job_id: UUID, artifact_id: UUID) -> Response:
    db = await jobs_db(request)
    return await artifact_download(db, str(job_id), str(artifact_id), viewer(request))


@router.post("/jobs/upload", status_code=201, summary="Upload a file for a job")
async def upload(
    request: Request,
    file: Annotated[UploadFile, File(description="The file")],
    jobId: Annotated[
        str | None,
        Form(max_length=36, pattern=NO_NUL, description="One of your jobs (else: for the next)"),
    ] = None,
) -> Uploaded:
    db = await jobs_db(request)
    stored = await store_upload(
        db, file, owner=key_id(request), viewer=viewer(request), job_id=jobId
    )
    return Uploaded(
        id=stored.id,
        filename=stored.filename,
        mime_type=stored.mime_type,
        size_bytes=stored.size_bytes,
        storage_path=stored.storage_path or "",
        public_url=None,
    )
