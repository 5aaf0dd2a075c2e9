"""The dashboard's Automations pages: cron tasks (created and edited with a preview of a
schedule's next runs; a task's runs from the ledger) and the heartbeat, through the
engine's own cron and heartbeat services."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError

from claybot.api.dashboard_auth import Session
from claybot.api.deps import CronDep, HeartbeatDep
from claybot.cron.scheduler import CronScheduler
from claybot.cron.task import CronTaskSpec
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.kernel.errors import ClayError
from claybot.kernel.ids import new_id
from claybot.web.rendering import page, see_other
from claybot.web.routes import guard, guard_form

router = APIRouter(include_in_schema=False)
PREVIEW_RUNS = 5
RUNS_SHOWN = 50


async def _page(
    request: Request,
    cron: CronScheduler,
    heartbeat: HeartbeatScheduler,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    preview: list[datetime] | None = None,
    problem: str = "",
) -> Response:
    return page(
        request,
        "automations.html",
        status_code=status_code,
        session=session,
        tasks=cron.listing(),
        problems=[problem.to_dict() for problem in cron.problems],
        heartbeat=await heartbeat.listing(),
        form=form or {},
        preview=preview or [],
        problem=problem,
        default_zone=cron.store.default_timezone,
    )


def _done() -> Response:
    return see_other("/automations")


@router.get("/automations")
async def automations(request: Request, cron: CronDep, heartbeat: HeartbeatDep) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return await _page(request, cron, heartbeat, session)


@router.post("/automations/cron")
async def new_cron_task(
    request: Request,
    cron: CronDep,
    heartbeat: HeartbeatDep,
    action: Annotated[Literal["preview", "create"], Form()],
    name: Annotated[str, Form(max_length=200)] = "",
    schedule: Annotated[str, Form(max_length=256)] = "",
    timezone: Annotated[str, Form(max_length=64)] = "",
    prompt: Annotated[str, Form(max_length=100_000)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """Preview a schedule's next runs, or create the task; either way the form keeps what
    was typed, and a problem is said next to it."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    form = {"name": name, "schedule": schedule, "timezone": timezone, "prompt": prompt}
    try:
        preview = cron.preview(schedule, timezone, PREVIEW_RUNS, datetime.now(UTC))
    except ClayError as exc:
        return await _page(request, cron, heartbeat, session, 422, form, problem=str(exc))
    if action == "preview":
        return await _page(request, cron, heartbeat, session, 200, form, preview)
    fields: dict[str, Any] = {"taskId": new_id(), "name": name.strip(), "schedule": schedule}
    if timezone.strip():
        fields["timezone"] = timezone.strip()
    try:
        spec = CronTaskSpec.model_validate(fields)
        _require_prompt(prompt)
        await cron.add(spec, prompt)
    except (ValidationError, ValueError, ClayError) as exc:
        return await _page(
            request, cron, heartbeat, session, 422, form, preview, problem=_problem_of(exc)
        )
    return see_other("/automations")


async def _task_page(
    request: Request,
    cron: CronScheduler,
    session: Session,
    task_id: str,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    preview: list[datetime] | None = None,
    problem: str = "",
) -> Response:
    task = next((task for task in cron.listing() if task["taskId"] == task_id), None)
    if task is None:
        return page(request, "not_found.html", status_code=404, session=session, what=task_id)
    fields = ("name", "schedule", "timezone", "prompt")
    return page(
        request,
        "automation_task.html",
        status_code=status_code,
        session=session,
        task=task,
        runs=await cron.run_history(task_id, RUNS_SHOWN),
        form=form or {field: str(task.get(field) or "") for field in fields},
        preview=preview or [],
        problem=problem,
        default_zone=cron.store.default_timezone,
    )


@router.get("/automations/cron/{task_id}")
async def cron_task(request: Request, cron: CronDep, task_id: str) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return await _task_page(request, cron, session, task_id)


@router.post("/automations/cron/{task_id}/edit")
async def edit_cron_task(
    request: Request,
    cron: CronDep,
    task_id: str,
    action: Annotated[Literal["preview", "save"], Form()],
    name: Annotated[str, Form(max_length=200)] = "",
    schedule: Annotated[str, Form(max_length=256)] = "",
    timezone: Annotated[str, Form(max_length=64)] = "",
    prompt: Annotated[str, Form(max_length=100_000)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """Preview the changed schedule's next runs, or save the changes; the form keeps
    what was typed either way."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    form = {"name": name, "schedule": schedule, "timezone": timezone, "prompt": prompt}
    try:
        preview = cron.preview(schedule, timezone, PREVIEW_RUNS, datetime.now(UTC))
    except ClayError as exc:
        return await _task_page(request, cron, session, task_id, 422, form, problem=str(exc))
    if action == "preview":
        return await _task_page(request, cron, session, task_id, 200, form, preview)
    try:
        _require_prompt(prompt)
        await cron.edit(task_id, name=name.strip(), schedule=schedule,
                        timezone=timezone.strip() or None, prompt=prompt)  # fmt: skip
    except (ValidationError, ValueError, ClayError) as exc:
        status = exc.status if isinstance(exc, ClayError) else 422
        return await _task_page(
            request, cron, session, task_id, status, form, preview, _problem_of(exc)
        )
    return see_other(f"/automations/cron/{task_id}")


@router.post("/automations/cron/{task_id}/{verb}")
async def act_on_cron_task(
    request: Request,
    cron: CronDep,
    heartbeat: HeartbeatDep,
    task_id: str,
    verb: Literal["run", "enable", "disable", "delete"],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        if verb == "run":
            await cron.run_now(task_id)
        elif verb == "delete":
            await cron.remove(task_id)
        else:
            await cron.set_enabled(task_id, verb == "enable")
    except ClayError as exc:
        return await _page(request, cron, heartbeat, session, exc.status, problem=str(exc))
    return see_other("/automations")


@router.post("/automations/heartbeat/run")
async def run_heartbeat(
    request: Request,
    heartbeat: HeartbeatDep,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    heartbeat.run_now(None)
    return see_other("/automations")


def _require_prompt(prompt: str) -> None:
    if not prompt.strip():
        raise ValueError("a task needs a prompt: what its agent is asked each run")


def _problem_of(exc: Exception) -> str:
    """What a refused form is told: a validation error's first message, else the error."""
    return exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
