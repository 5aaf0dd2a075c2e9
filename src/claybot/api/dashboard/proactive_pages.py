"""The dashboard's Proactive agents page (seed 004's Agents section): cards with their
status, next run and last result; run now, pause, resume; create; an agent's executions
and its latest output. Through the engine's own proactive service."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError

from claybot.api.dashboard.auth import Session
from claybot.api.dashboard.rendering import page, see_other
from claybot.api.dashboard.routes import engine_of, guard, guard_form
from claybot.kernel.errors import ClayError
from claybot.proactive.inputs import CreateAgentInput

router = APIRouter(include_in_schema=False)
EXECUTIONS_SHOWN = 20


async def _list_page(
    request: Request,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    service = engine_of(request).proactive
    return page(
        request,
        "proactive.html",
        status_code=status_code,
        session=session,
        agents=service.summaries(),
        form=form or {},
        problem=problem,
    )


@router.get("/proactive")
async def proactive(request: Request) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return await _list_page(request, session)


@router.post("/proactive")
async def create(
    request: Request,
    name: Annotated[str, Form(max_length=200)] = "",
    objective: Annotated[str, Form(max_length=20_000)] = "",
    schedule: Annotated[str, Form(max_length=256)] = "",
    timezone: Annotated[str, Form(max_length=64)] = "",
    cwd: Annotated[str, Form(max_length=4096)] = "",
    runner: Annotated[Literal["claude", "engine"], Form()] = "claude",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    form = {"name": name, "objective": objective, "schedule": schedule, "timezone": timezone,
            "cwd": cwd, "runner": runner}  # fmt: skip
    fields: dict[str, Any] = {"name": name, "objective": objective, "schedule": schedule,
                              "runner": runner}  # fmt: skip
    if timezone.strip():
        fields["timezone"] = timezone.strip()
    if cwd.strip():
        fields["cwd"] = cwd.strip()
    try:
        created = await engine_of(request).proactive.create(CreateAgentInput(**fields))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return await _list_page(request, session, 422, form, f"{where}: {error['msg']}")
    except ClayError as exc:
        return await _list_page(request, session, exc.status, form, str(exc))
    return see_other(f"/proactive/{created['id']}")


@router.get("/proactive/{agent_id}")
async def agent(request: Request, agent_id: str) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    service = engine_of(request).proactive
    try:
        detail = service.detail(agent_id)
        executions = await service.executions(agent_id, EXECUTIONS_SHOWN)
    except ClayError:
        return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
    try:
        output = service.live_output(agent_id)
    except ClayError:  # it has produced none yet
        output = ""
    return page(
        request,
        "proactive_agent.html",
        session=session,
        agent=detail,
        executions=executions,
        output=output,
    )


@router.post("/proactive/{agent_id}/{verb}")
async def act(
    request: Request,
    agent_id: str,
    verb: Literal["run", "pause", "resume"],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    service = engine_of(request).proactive
    try:
        if verb == "run":
            await service.trigger(agent_id)
        elif verb == "pause":
            await service.pause(agent_id)
        else:
            await service.resume(agent_id)
    except ClayError as exc:  # unknown, already running and queued full, or stopping
        return page(request, "problem.html", status_code=exc.status, session=session,
                    message=str(exc), back="/proactive")  # fmt: skip
    return see_other(f"/proactive/{agent_id}")
