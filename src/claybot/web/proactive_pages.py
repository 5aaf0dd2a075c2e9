"""The dashboard's Proactive agents page (seed 004's Agents section): cards with their
status, next run and last result; run now, pause, resume; create, edit and delete; an
agent's executions with their logs, and its output live while it runs. Through the
engine's own proactive service (the same messages its WebSocket clients get)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import FileResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from claybot.api.dashboard_auth import Session
from claybot.api.deps import ProactiveDep
from claybot.kernel.errors import ClayError
from claybot.kernel.sse import LF, sse_frame
from claybot.proactive.broadcast import Listener
from claybot.proactive.inputs import CreateAgentInput, UpdateAgentInput
from claybot.proactive.service import ProactiveService
from claybot.web.rendering import SECURITY_HEADERS, page, see_other
from claybot.web.routes import guard, guard_form

router = APIRouter(include_in_schema=False)


class AgentForm(BaseModel):
    """A proactive agent's form, as creating and editing post it."""

    name: str = Field(default="", max_length=200)
    objective: str = Field(default="", max_length=20_000)
    schedule: str = Field(default="", max_length=256)
    timezone: str = Field(default="", max_length=64)
    cwd: str = Field(default="", max_length=4096)
    runner: Literal["claude", "engine"] = "claude"
    csrf: str | None = Field(default=None, max_length=200)

    def shown(self) -> dict[str, str]:
        """What the form shows again after a problem: what was typed."""
        return {key: str(value) for key, value in self.model_dump(exclude={"csrf"}).items()}

    def create_input(self) -> CreateAgentInput:
        """The agent to create (ValidationError: what is wrong, by field)."""
        return CreateAgentInput.model_validate(self._fields())

    def update_input(self) -> UpdateAgentInput:
        """The agent's changes: every field of the form (ValidationError as above)."""
        return UpdateAgentInput.model_validate(self._fields())

    def _fields(self) -> dict[str, str]:
        """An empty time zone or folder is left out (the default, or the current one
        when editing)."""
        fields = {"name": self.name, "objective": self.objective,
                  "schedule": self.schedule, "runner": self.runner}  # fmt: skip
        if self.timezone.strip():
            fields["timezone"] = self.timezone.strip()
        if self.cwd.strip():
            fields["cwd"] = self.cwd.strip()
        return fields


EXECUTIONS_SHOWN = 20


async def _list_page(
    request: Request,
    service: ProactiveService,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
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
async def proactive(request: Request, service: ProactiveDep) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return await _list_page(request, service, session)


@router.post("/proactive")
async def create(
    request: Request, service: ProactiveDep, posted: Annotated[AgentForm, Form()]
) -> Response:
    session = await guard_form(request, posted.csrf)
    if isinstance(session, Response):
        return session
    form = posted.shown()
    try:
        created = await service.create(posted.create_input())
    except ValidationError as exc:
        return await _list_page(request, service, session, 422, form, _first_problem(exc))
    except ClayError as exc:
        return await _list_page(request, service, session, exc.status, form, str(exc))
    return see_other(f"/proactive/{created['id']}")


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}"


@router.get("/proactive/{agent_id}")
async def agent(request: Request, service: ProactiveDep, agent_id: str) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return await _agent_page(request, service, session, agent_id)


async def _agent_page(
    request: Request,
    service: ProactiveService,
    session: Session,
    agent_id: str,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
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
        status_code=status_code,
        session=session,
        agent=detail,
        executions=executions,
        output=output,
        form=form or {key: str(detail.get(key) or "") for key in EDITABLE},
        problem=problem,
    )


EDITABLE = ("name", "objective", "schedule", "timezone", "cwd", "runner")


@router.post("/proactive/{agent_id}/edit")
async def edit(
    request: Request, service: ProactiveDep, agent_id: str, posted: Annotated[AgentForm, Form()]
) -> Response:
    """Change what the form holds; an empty time zone or folder keeps the current one."""
    session = await guard_form(request, posted.csrf)
    if isinstance(session, Response):
        return session
    form = posted.shown()
    try:
        await service.update(agent_id, posted.update_input())
    except ValidationError as exc:
        return await _agent_page(
            request, service, session, agent_id, 422, form, _first_problem(exc)
        )
    except ClayError as exc:
        if exc.status == 404:
            return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
        return await _agent_page(request, service, session, agent_id, exc.status, form, str(exc))
    return see_other(f"/proactive/{agent_id}")


@router.post("/proactive/{agent_id}/delete")
async def delete(
    request: Request,
    service: ProactiveDep,
    agent_id: str,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        await service.delete(agent_id)
    except ClayError:
        return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
    return see_other("/proactive")


@router.get("/proactive/{agent_id}/log")
async def run_log(
    request: Request,
    service: ProactiveDep,
    agent_id: str,
    execution: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """A run's log as plain text (the newest run's without ``execution``)."""
    session = await guard(request)
    if isinstance(session, Response):
        return session
    try:
        path = await service.log_path(agent_id, execution)
    except ClayError as exc:
        return page(request, "problem.html", status_code=exc.status, session=session,
                    message=str(exc), back=f"/proactive/{agent_id}")  # fmt: skip
    return FileResponse(path, media_type="text/plain; charset=utf-8", headers=SECURITY_HEADERS)


@router.get("/proactive/{agent_id}/live")
async def live(request: Request, service: ProactiveDep, agent_id: str) -> Response:
    """The agent's output as it is written, and its state as it changes (SSE): first
    what it has written so far, then each new piece. A reconnect starts over with the
    whole output, so nothing needs replaying."""
    session = await guard(request)
    if isinstance(session, Response):
        return session
    listener = service.broadcaster.listen()  # before the snapshot: nothing falls between
    try:
        service.detail(agent_id)
    except ClayError:
        listener.close()
        return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
    try:
        output = service.live_output(agent_id)
    except ClayError:
        output = ""
    return StreamingResponse(
        _live_frames(listener, agent_id, output),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _live_frames(listener: Listener, agent_id: str, output: str) -> AsyncIterator[bytes]:
    def frame(kind: str, data: dict[str, Any]) -> bytes:
        return sse_frame(json.dumps({"type": kind, "payload": data}).encode(), eol=LF)

    try:
        yield frame("snapshot", {"text": output})
        async for message in listener:
            data = message.get("data") or {}
            if data.get("agentId", data.get("id")) != agent_id:
                continue
            if message["type"] == "agent:output":
                yield frame("output", {"text": data.get("text", "")})
            elif message["type"] in ("agent:update", "agent:deleted"):
                yield frame(message["type"], data)
    finally:
        listener.close()


@router.post("/proactive/{agent_id}/{verb}")
async def act(
    request: Request,
    service: ProactiveDep,
    agent_id: str,
    verb: Literal["run", "pause", "resume"],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
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
