"""Seed 002's job API under ``/api/v1``: paths, fields and status codes as the seed has
them, so a client written against it works unchanged.

Who sees what: on TCP a key sees only the jobs it created (another key's job is
404, as unknown as a missing one) unless it has ``admin``; the Unix socket is the
owner's and sees every job. Scopes are checked by the TCP middleware
(``tcp_auth.required_scope``); errors here take the seed's shape
(``seed_errors.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.responses import Response, StreamingResponse

from claybot import __version__
from claybot.api.bounds import INT64_MAX, Offset
from claybot.api.deps import JobsDep
from claybot.api.responses import seed_errors
from claybot.jobs.artifact_links import ArtifactLinks
from claybot.jobs.model import (
    EVERYONE,
    JobStatus,
    Owner,
    StoredFile,
    visible_to,
)
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
    download_response,
    log_events,
    status_name,
)

router = APIRouter(
    prefix="/api/v1", tags=["jobs (seed 002)"], responses=seed_errors(400, 404, 413, 500, 503, 507)
)
UPLOAD_PATH = "/api/v1/jobs/upload"


async def key_id(request: Request) -> str | None:
    """The API key's id on TCP; None on the Unix socket (the owner)."""
    record = request.scope.get("state", {}).get("api_key")
    return None if record is None else str(record.id)


async def viewer(request: Request) -> Owner:
    """Whose jobs this request may see: a key's own, or all (admin, the socket)."""
    record = request.scope.get("state", {}).get("api_key")
    if record is None:
        return EVERYONE
    return visible_to(str(record.id), record.scopes)


async def artifact_links(request: Request) -> ArtifactLinks:
    """The signer of artifacts' links (the app's: the TCP listener checks them)."""
    links = request.app.state.artifact_links
    assert isinstance(links, ArtifactLinks)
    return links


Viewer = Annotated[Owner, Depends(viewer)]
Creator = Annotated[str | None, Depends(key_id)]
Links = Annotated[ArtifactLinks, Depends(artifact_links)]


def artifact_infos(
    links: ArtifactLinks, job_id: str, stored: list[StoredFile]
) -> list[ArtifactInfo]:
    """A job's artifacts as the API lists them, each with its signed link."""
    return [ArtifactInfo.of(file, links.url(job_id, file.id)) for file in stored]


@router.get("/health", summary="Is the API up (no key needed)")
async def health() -> Health:
    return Health(status="healthy", timestamp=datetime.now(UTC).isoformat(), version=__version__)


@router.post("/jobs", status_code=201, summary="Queue a job")
async def create_job(jobs: JobsDep, creator: Creator, body: CreateJob) -> JobCreated:
    job = await jobs.queue(body.new_job(creator))
    return JobCreated(
        id=job.id,
        status=status_name(job.status),
        task=job.task,
        created_at=job.created_at.isoformat(),
    )


@router.get("/jobs", summary="Jobs, newest first")
async def list_jobs(
    jobs: JobsDep,
    owner: Viewer,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Offset = 0,
) -> JobPage:
    found, count = await jobs.page(owner, status=status, limit=limit, offset=offset)
    return JobPage(jobs=[JobSummary.of(j) for j in found], count=count, offset=offset, limit=limit)


@router.get("/jobs/{job_id:uuid}", summary="A job, with its artifacts")
async def get_job(jobs: JobsDep, owner: Viewer, links: Links, job_id: UUID) -> JobDetail:
    job = await jobs.job(str(job_id), owner)
    return JobDetail.of(job, artifact_infos(links, job.id, await jobs.artifacts(job.id)))


@router.post("/jobs/{job_id:uuid}/respond", summary="Answer a job that waits for you")
async def respond(jobs: JobsDep, owner: Viewer, job_id: UUID, body: RespondToJob) -> Responded:
    job, text = await jobs.respond(str(job_id), body.action, body.answer, body.editedPlan, owner)
    return Responded(id=job.id, status=status_name(job.status), message=text)


async def _cancel(jobs: JobsDep, owner: Owner, links: ArtifactLinks, job_id: UUID) -> JobDetail:
    job = await jobs.cancel(str(job_id), owner)
    return JobDetail.of(job, artifact_infos(links, job.id, await jobs.artifacts(job.id)))


@router.post("/jobs/{job_id:uuid}/cancel", summary="Cancel a job (a running one within seconds)")
async def cancel_job(jobs: JobsDep, owner: Viewer, links: Links, job_id: UUID) -> JobDetail:
    return await _cancel(jobs, owner, links, job_id)


@router.delete("/jobs/{job_id:uuid}", summary="Cancel a job (seed 002's way)")
async def delete_job(jobs: JobsDep, owner: Viewer, links: Links, job_id: UUID) -> JobDetail:
    return await _cancel(jobs, owner, links, job_id)


@router.get(
    "/jobs/{job_id:uuid}/logs",
    summary="A job's log, oldest first; `follow=true` streams it (SSE) until the job ends",
    response_model=LogPage,
    responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}},
)
async def job_logs(
    request: Request,
    jobs: JobsDep,
    owner: Viewer,
    job_id: UUID,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
    after: Annotated[int, Query(ge=0, le=INT64_MAX, description="Only lines after this id")] = 0,
    follow: bool = False,
) -> LogPage | StreamingResponse:
    job = await jobs.job(str(job_id), owner)
    if follow or "text/event-stream" in request.headers.get("accept", ""):
        followed = log_events(jobs.follow_log(job.id, after))
        return StreamingResponse(followed, media_type="text/event-stream")
    lines = await jobs.log(job.id, after=after, limit=limit, offset=offset)
    return LogPage(
        logs=[LogEntry.of(line) for line in lines], count=len(lines), offset=offset, limit=limit
    )


@router.get("/jobs/{job_id:uuid}/artifacts", summary="A job's artifacts")
async def list_artifacts(jobs: JobsDep, owner: Viewer, links: Links, job_id: UUID) -> ArtifactList:
    job = await jobs.job(str(job_id), owner)
    artifacts = artifact_infos(links, job.id, await jobs.artifacts(job.id))
    return ArtifactList(artifacts=artifacts, count=len(artifacts))


@router.get(
    "/jobs/{job_id:uuid}/artifacts/{artifact_id:uuid}",
    summary="Download an artifact",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}},
)
async def download_artifact(
    jobs: JobsDep, owner: Viewer, job_id: UUID, artifact_id: UUID
) -> Response:
    return download_response(await jobs.download(str(job_id), str(artifact_id), owner))


@router.post("/jobs/upload", status_code=201, summary="Upload a file for a job")
async def upload(
    jobs: JobsDep,
    creator: Creator,
    owner: Viewer,
    file: Annotated[UploadFile, File(description="The file")],
    jobId: Annotated[
        str | None,
        Form(max_length=36, pattern=NO_NUL, description="One of your jobs (else: for the next)"),
    ] = None,
) -> Uploaded:
    stored = await jobs.store_upload(file, owner=creator, viewer=owner, job_id=jobId)
    return Uploaded.of(stored)
