"""The dashboard's Jobs pages (seed 002's jobs, through the engine's own job database).

The list (paged, filtered by status, counted), a create form with attachments, a job
with its plan to approve, its live log and its artifacts, and the workers. Every
action goes through the same service as the job API (``jobs/service.py``), under the
same rule of who sees what: a key's session sees only the jobs its key created,
unless the key is ``admin``. Viewing needs ``jobs:read``, acting ``jobs:write``, the
workers page ``admin``; no key ever reaches the browser (the session cookie is
HttpOnly, and pages call no API with a key).

The pages stay current without a framework: ``static/jobs.js`` asks for a page's
live part again (the same URL with ``X-Jobs-Fragment``, answered with that block of
the template only) and follows a job's log as server-sent events.

It is longer than most page modules because a job's pages act on one job's life
(create, plan, respond, cancel, log, artifacts) under one access rule, which the
shared helpers at the top apply to every route.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from claybot.api.bounds import INT64_MAX
from claybot.api.dashboard_auth import Session
from claybot.api.deps import JobsDep, KeysDep
from claybot.jobs.model import HitlMode, Job, JobStatus, Owner, visible_to
from claybot.jobs.service import JobService
from claybot.kernel.errors import ClayError, NotFound
from claybot.web.markdown import render_markdown
from claybot.web.rendering import SECURITY_HEADERS, page, see_other, templates
from claybot.web.routes import guard, guard_form
from claybot.wire.jobs import (
    CreateJob,
    Metrics,
    RespondToJob,
    WorkerList,
    download_response,
    log_events,
)

router = APIRouter(include_in_schema=False)
JOBS_PER_PAGE = 50
LOG_LINES_SHOWN = 1000  # the rest (and what comes) arrives through the log's stream
MAX_ATTACHMENTS = 50  # as many as a job may name (CreateJob.attachments)
FRAGMENT_HEADER = "X-Jobs-Fragment"  # jobs.js asks for a page's live part with it
HITL_LABELS = {
    HitlMode.PLAN_APPROVAL: "Ask me to approve a plan first",
    HitlMode.AUTO_EXECUTE: "Run without asking (it acts on its own)",
    HitlMode.ALWAYS_ASK: "Ask me before every action",
}


@dataclass(frozen=True)
class Question:
    """What a waiting job asks: a plan (markdown) to approve, or a plain question."""

    text: str
    plan: str | None = None


def question_of(raw: str | None) -> Question | None:
    """A job's ``agent_question`` as the page shows it: ``{"type": "plan", "plan": ...,
    "question": ...}`` is a plan; anything else is a question in plain text."""
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return Question(raw)
    if (
        isinstance(value, dict)
        and value.get("type") == "plan"
        and isinstance(value.get("plan"), str)
        and isinstance(value.get("question"), str)
    ):
        return Question(value["question"], value["plan"])
    return Question(raw)


def _ms(moment: datetime | None) -> float | None:
    """A time as the templates' ``utc`` and ``iso`` filters take it (unix ms)."""
    return None if moment is None else moment.timestamp() * 1000


def _version(*parts: object) -> str:
    """What a live block shows, in short: jobs.js replaces the block when it changes."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def _owner(session: Session) -> Owner:
    return visible_to(session.key_id, session.scopes)


def _problem(request: Request, session: Session, exc: ClayError, back: str) -> Response:
    return page(
        request,
        "problem.html",
        status_code=exc.status,
        session=session,
        message=str(exc),
        back=back,
    )


def _not_found(request: Request, session: Session, job_id: str) -> Response:
    return page(
        request,
        "not_found.html",
        status_code=404,
        session=session,
        what=job_id,
        back="/jobs",
        back_label="Every job",
    )


def _live_block(request: Request, name: str, context: dict[str, Any]) -> Response:
    """The template's ``live`` block alone: what jobs.js swaps into the page."""
    template = templates.get_template(name)
    body = "".join(template.blocks["live"](template.new_context({"request": request, **context})))
    response = HTMLResponse(body, headers=SECURITY_HEADERS)
    response.headers["Vary"] = FRAGMENT_HEADER
    return response


# -- the list ------------------------------------------------------------------------------


async def _list_page(
    request: Request,
    jobs: JobService,
    session: Session,
    *,
    status: JobStatus | None = None,
    page_number: int = 1,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    try:
        owner = _owner(session)
        listed, total = await jobs.page(
            owner, status=status, limit=JOBS_PER_PAGE, offset=(page_number - 1) * JOBS_PER_PAGE
        )
        counts = await jobs.counts(owner)
    except ClayError as exc:  # the database cannot be reached
        return _problem(request, session, exc, "/jobs")
    context: dict[str, Any] = {
        "session": session,
        "jobs": listed,
        "total": total,
        "counts": counts,
        "every": sum(counts.values()),
        "statuses": list(JobStatus),
        "status": status.value if status else "",
        "page_number": page_number,
        "pages": max(1, -(-total // JOBS_PER_PAGE)),
        "ms": _ms,
        "version": _version(
            total, counts, [(job.id, job.status, job.updated_at) for job in listed]
        ),
    }
    if request.headers.get(FRAGMENT_HEADER) and status_code == 200:
        return _live_block(request, "jobs.html", context)
    return page(
        request,
        "jobs.html",
        status_code=status_code,
        form=form or {"timeout_seconds": "300", "hitl_mode": HitlMode.PLAN_APPROVAL.value},
        problem=problem,
        hitl_labels=HITL_LABELS,
        **context,
    )


@router.get("/jobs")
async def jobs(
    request: Request,
    service: JobsDep,
    status: Annotated[str | None, Query(max_length=32)] = None,
    page_number: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
) -> Response:
    session = await guard(request, "jobs:read")
    if isinstance(session, Response):
        return session
    chosen = JobStatus(status) if status in set(JobStatus) else None
    return await _list_page(request, service, session, status=chosen, page_number=page_number)


@router.post("/jobs")
async def create(
    request: Request,
    jobs: JobsDep,
    task: Annotated[str, Form(max_length=10_000)] = "",
    model: Annotated[str, Form(max_length=200)] = "",
    timeout_seconds: Annotated[str, Form(max_length=10)] = "",
    hitl_mode: Annotated[str, Form(max_length=32)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf, "jobs:write")
    if isinstance(session, Response):
        return session
    form = {
        "task": task,
        "model": model,
        "timeout_seconds": timeout_seconds,
        "hitl_mode": hitl_mode,
    }
    uploads = [
        item
        for item in (await request.form()).getlist("attachments")
        if isinstance(item, UploadFile) and (item.filename or item.size)
    ]

    async def again(status_code: int, problem: str) -> Response:
        if uploads:  # a browser cannot be handed its files back
            problem += " (choose the files again)"
        return await _list_page(
            request, jobs, session, status_code=status_code, form=form, problem=problem
        )

    seconds = timeout_seconds.strip() or "300"
    if not seconds.isdecimal():  # isdigit() takes "²", which int() refuses
        return await again(422, "timeout_seconds: a whole number of seconds, 30 to 3600")
    fields: dict[str, Any] = {
        "task": task.strip(),
        "hitl_mode": hitl_mode or "plan_approval",
        "timeout_seconds": int(seconds),
    }
    if model.strip():
        fields["model"] = model.strip()
    try:
        body = CreateJob.model_validate(fields)  # checked as the API checks a body
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return await again(422, f"{where}: {error['msg']}")
    if len(uploads) > MAX_ATTACHMENTS:
        return await again(422, f"attachments: at most {MAX_ATTACHMENTS} files")
    owner = _owner(session)
    try:
        stored = [
            await jobs.store_upload(upload, owner=session.key_id, viewer=owner)
            for upload in uploads
        ]
        body = body.model_copy(update={"attachments": [item.id for item in stored]})
        job = await jobs.queue(body.new_job(session.key_id))
    except ClayError as exc:  # a file too large (its field named: the form's 422), or no database
        return await again(422 if exc.field else exc.status, str(exc))
    return see_other(f"/jobs/{job.id}")


# -- workers and metrics (before /jobs/{job_id}: "workers" is no job) ----------------------


@router.get("/jobs/workers")
async def workers(request: Request, jobs: JobsDep, keys: KeysDep) -> Response:
    session = await guard(request, "admin")
    if isinstance(session, Response):
        return session
    try:
        listed = WorkerList.of(await jobs.workers())
        numbers = Metrics.of(await jobs.metrics(), await keys.list())
    except ClayError as exc:
        return _problem(request, session, exc, "/jobs")
    return page(
        request,
        "job_workers.html",
        session=session,
        workers=listed.workers,
        summary=listed.summary,
        metrics=numbers,
    )


# -- a job ---------------------------------------------------------------------------------


async def _job_page(
    request: Request,
    jobs: JobService,
    session: Session,
    job_id: str,
    *,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    try:
        job = await jobs.job(job_id, _owner(session))
        artifacts = await jobs.artifacts(job.id)
        lines = await jobs.log(job.id, after=0, limit=LOG_LINES_SHOWN)
    except NotFound:  # another key's job is as unknown as a missing one
        return _not_found(request, session, job_id)
    except ClayError as exc:
        return _problem(request, session, exc, "/jobs")
    question = question_of(job.agent_question) if _waits(job) else None
    context: dict[str, Any] = {
        "session": session,
        "job": job,
        "artifacts": artifacts,
        "question": question,
        "plan_html": render_markdown(question.plan) if question and question.plan else None,
        "form": form or {},
        "problem": problem,
        "ms": _ms,
        "version": _version(job.status, job.updated_at, [file.id for file in artifacts]),
    }
    if request.headers.get(FRAGMENT_HEADER) and status_code == 200:
        return _live_block(request, "job.html", context)
    return page(
        request,
        "job.html",
        status_code=status_code,
        lines=lines,
        last_line=lines[-1].id if lines else 0,
        **context,
    )


def _waits(job: Job) -> bool:
    return job.status is JobStatus.WAITING_FOR_USER


@router.get("/jobs/{job_id}")
async def job(request: Request, jobs: JobsDep, job_id: str) -> Response:
    session = await guard(request, "jobs:read")
    if isinstance(session, Response):
        return session
    return await _job_page(request, jobs, session, job_id)


@router.post("/jobs/{job_id}/respond")
async def respond(
    request: Request,
    jobs: JobsDep,
    job_id: str,
    action: Annotated[str, Form(max_length=16)] = "respond",
    answer: Annotated[str, Form(max_length=10_000)] = "",
    editedPlan: Annotated[str, Form(max_length=50_000)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf, "jobs:write")
    if isinstance(session, Response):
        return session
    form = {"answer": answer, "editedPlan": editedPlan}
    # A browser sends a box's line ends as CRLF; the model reads what was typed.
    fields = {
        "action": action,
        "answer": answer.replace("\r\n", "\n").strip(),
        "editedPlan": editedPlan.replace("\r\n", "\n").strip() or None,
    }
    try:
        body = RespondToJob.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return await _job_page(
            request,
            jobs,
            session,
            job_id,
            status_code=422,
            form=form,
            problem=f"{where}: {error['msg']}",
        )
    try:
        await jobs.respond(job_id, body.action, body.answer, body.editedPlan, _owner(session))
    except NotFound:
        return _not_found(request, session, job_id)
    except ClayError as exc:  # no answer where one is needed, or the job waits no more
        status_code = 422 if exc.field else exc.status
        return await _job_page(
            request, jobs, session, job_id, status_code=status_code, form=form, problem=str(exc)
        )
    return see_other(f"/jobs/{job_id}")


@router.post("/jobs/{job_id}/cancel")
async def cancel(
    request: Request,
    jobs: JobsDep,
    job_id: str,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf, "jobs:write")
    if isinstance(session, Response):
        return session
    try:
        await jobs.cancel(job_id, _owner(session))
    except NotFound:
        return _not_found(request, session, job_id)
    except ClayError as exc:  # it has ended already
        return _problem(request, session, exc, f"/jobs/{job_id}")
    return see_other(f"/jobs/{job_id}")


@router.get("/jobs/{job_id}/logs/stream")
async def log_stream(
    request: Request,
    jobs: JobsDep,
    job_id: str,
    after: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
) -> Response:
    """The job's log as server-sent events (EventSource, with the session's cookie); a
    reconnecting EventSource names the last line it had in ``Last-Event-ID``."""
    session = await guard(request, "jobs:read")
    if isinstance(session, Response):
        return session
    resumed = request.headers.get("last-event-id", "")
    # isdecimal: isdigit() takes "²", which int() refuses; no line has a larger id.
    if resumed.isdecimal() and int(resumed) <= INT64_MAX:
        after = max(after, int(resumed))
    try:
        found = await jobs.job(job_id, _owner(session))
    except NotFound:
        return Response("no such job", status_code=404, media_type="text/plain")
    except ClayError as exc:
        return Response(str(exc), status_code=exc.status, media_type="text/plain")
    return StreamingResponse(
        log_events(jobs.follow_log(found.id, after)),
        media_type="text/event-stream",
        headers={**SECURITY_HEADERS, "X-Accel-Buffering": "no"},
    )


@router.get("/jobs/{job_id}/artifacts/{artifact_id}")
async def artifact(request: Request, jobs: JobsDep, job_id: str, artifact_id: str) -> Response:
    session = await guard(request, "jobs:read")
    if isinstance(session, Response):
        return session
    try:
        return download_response(await jobs.download(job_id, artifact_id, _owner(session)))
    except NotFound:
        return _not_found(request, session, artifact_id)
    except ClayError as exc:
        return _problem(request, session, exc, f"/jobs/{job_id}")
