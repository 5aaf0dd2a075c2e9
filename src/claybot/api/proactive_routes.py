"""Proactive agents (seed 004) under ``/api/agents``, and their WebSocket.

On the socket these are the owner's; on TCP they need ``agents:read`` (GET and
the WebSocket) or ``agents:write`` (everything else).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, PlainTextResponse

from claybot.api.models.base import AnswerRoute
from claybot.api.models.proactive import (
    ExecutionList,
    OneProactiveAgent,
    ProactiveAgentDeleted,
    ProactiveAgentList,
    ProactiveRunQueued,
)
from claybot.api.proactive_bodies import CreateAgentInput, UpdateAgentInput
from claybot.api.responses import BODY_ERRORS, errors
from claybot.engine.engine import Engine
from claybot.proactive.service import ProactiveService

router = APIRouter(prefix="/api/agents", tags=["proactive agents"], route_class=AnswerRoute)

WS_OVERFLOW_CODE = 1013  # "try again later": the client fell too far behind
WS_GOING_AWAY_CODE = 1001


def _service(engine: Any) -> ProactiveService:
    assert isinstance(engine, Engine)
    return engine.proactive


def service_of(request: Request) -> ProactiveService:
    return _service(request.app.state.engine)


def _one(agent: dict[str, Any]) -> OneProactiveAgent:
    return OneProactiveAgent.model_validate({"ok": True, "agent": agent})


@router.post(
    "",
    status_code=201,
    summary="Create a proactive agent",
    responses=errors(*BODY_ERRORS, 409, 503),
)
async def create_agent(request: Request, body: CreateAgentInput) -> OneProactiveAgent:
    return _one(await service_of(request).create(body))


@router.get("", summary="List proactive agents")
async def list_agents(request: Request) -> ProactiveAgentList:
    return ProactiveAgentList.model_validate(
        {"ok": True, "agents": service_of(request).summaries()}
    )


@router.get("/{agentId}", summary="A proactive agent's detail", responses=errors(404))
async def get_agent(request: Request, agentId: str) -> OneProactiveAgent:
    return _one(service_of(request).detail(agentId))


@router.put(
    "/{agentId}",
    summary="Change an agent's configuration (only the fields given)",
    responses=errors(*BODY_ERRORS, 404, 503),
)
async def update_agent(request: Request, agentId: str, body: UpdateAgentInput) -> OneProactiveAgent:
    return _one(await service_of(request).update(agentId, body))


@router.post(
    "/{agentId}/pause",
    summary="Pause an agent (its schedule stops)",
    responses=errors(404, 503),
)
async def pause_agent(request: Request, agentId: str) -> OneProactiveAgent:
    return _one(await service_of(request).pause(agentId))


@router.post(
    "/{agentId}/resume",
    summary="Resume an agent (failures reset, schedule restarts)",
    responses=errors(404, 503),
)
async def resume_agent(request: Request, agentId: str) -> OneProactiveAgent:
    return _one(await service_of(request).resume(agentId))


@router.post(
    "/{agentId}/execute",
    status_code=202,
    summary="Run an agent now (queued)",
    responses=errors(404, 409, 503),
)
async def execute_agent(request: Request, agentId: str) -> ProactiveRunQueued:
    queued = await service_of(request).trigger(agentId)
    return ProactiveRunQueued.model_validate({"ok": True, "agentId": agentId, **queued})


@router.delete("/{agentId}", summary="Delete an agent and its files", responses=errors(404, 503))
async def delete_agent(request: Request, agentId: str) -> ProactiveAgentDeleted:
    await service_of(request).delete(agentId)
    return ProactiveAgentDeleted(ok=True, id=agentId)


@router.get(
    "/{agentId}/logs",
    summary="An execution's clean log (text/plain): the newest, or ?executionId=",
    response_class=PlainTextResponse,
    responses=errors(404, 422),
)
async def agent_logs(
    request: Request,
    agentId: str,
    executionId: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
) -> FileResponse:
    path = await service_of(request).log_path(agentId, executionId)
    return FileResponse(path, media_type="text/plain; charset=utf-8")


@router.get(
    "/{agentId}/executions",
    summary="Execution history, newest first",
    responses=errors(404, 422),
)
async def agent_executions(
    request: Request,
    agentId: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> ExecutionList:
    executions = await service_of(request).executions(agentId, limit)
    return ExecutionList.model_validate({"ok": True, "agentId": agentId, "executions": executions})


@router.get(
    "/{agentId}/output",
    summary="The running (or last) execution's output so far (text/plain)",
    response_class=PlainTextResponse,
    responses=errors(404),
)
async def agent_output(request: Request, agentId: str) -> PlainTextResponse:
    return PlainTextResponse(service_of(request).live_output(agentId))


@router.websocket("/ws")
async def agents_ws(websocket: WebSocket) -> None:
    """``{type, data}``: ``agent:list`` first, then updates, output, executions, misfires."""
    service = _service(websocket.app.state.engine)
    listener = service.broadcaster.listen()  # before the snapshot: nothing falls in between
    await websocket.accept()

    async def until_disconnected() -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.receive_text()  # clients have nothing to say; drain pings

    receiver = asyncio.create_task(until_disconnected())
    receiver.add_done_callback(lambda _: listener.close())
    try:
        await websocket.send_json({"type": "agent:list", "data": {"agents": service.summaries()}})
        async for message in listener:
            await websocket.send_json(message)
        if not receiver.done():
            code = WS_OVERFLOW_CODE if listener.overflowed else WS_GOING_AWAY_CODE
            await websocket.close(code=code)
    except (WebSocketDisconnect, OSError, RuntimeError):
        pass  # the client left while a message was being sent
    finally:
        listener.close()
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await receiver
