"""Proactive agents (seed 004) under ``/api/agents``, and their WebSocket.

On the socket these are the owner's; on TCP they need ``agents:read`` (GET and
the WebSocket) or ``agents:write`` (everything else). Errors come in the shape
codeck's web client reads (``codeck_errors.py``).

The WebSocket speaks two dialects of the same ``{type, data}`` messages (see
``stream_messages``): ClayBot's at ``/api/agents/ws`` (every message, ``agent:list``
first) and codeck's at ``/`` (``routes.py``: only the types its client knows).
Both send ``{"type": "heartbeat"}`` after ``proactive.wsHeartbeatS`` of silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, PlainTextResponse

from claybot.api.codeck.proactive_bodies import CreateAgentInput, UpdateAgentInput
from claybot.api.deps import ConfigurationDep, ProactiveDep
from claybot.api.responses import BODY_ERRORS, codeck_errors
from claybot.proactive.broadcast import Message
from claybot.proactive.models import AgentDetail
from claybot.proactive.service import ProactiveService
from claybot.wire.base import AnswerRoute
from claybot.wire.proactive import (
    ExecutionList,
    OneProactiveAgent,
    ProactiveAgentDeleted,
    ProactiveAgentList,
    ProactiveRunQueued,
)

router = APIRouter(
    prefix="/api/agents",
    tags=["proactive agents"],
    route_class=AnswerRoute,
    responses=codeck_errors(500),  # a bug, answered in codeck's shape too
)

WS_OVERFLOW_CODE = 1013  # "try again later": the client fell too far behind
WS_GOING_AWAY_CODE = 1001
HEARTBEAT: Message = {"type": "heartbeat"}
# The latest time ``?ts=`` may name (9999-12-31): past it no execution could have a stamp.
MAX_TS_MS = 253_402_300_799_999


def _one(agent: AgentDetail) -> OneProactiveAgent:
    return OneProactiveAgent.model_validate({"ok": True, "agent": agent})


@router.post(
    "",
    status_code=201,
    summary="Create a proactive agent",
    responses=codeck_errors(*BODY_ERRORS, 409, 503),
)
async def create_agent(service: ProactiveDep, body: CreateAgentInput) -> OneProactiveAgent:
    return _one(await service.create(body))


@router.get("", summary="List proactive agents")
async def list_agents(service: ProactiveDep) -> ProactiveAgentList:
    return ProactiveAgentList.model_validate({"ok": True, "agents": service.summaries()})


@router.get("/{agentId}", summary="A proactive agent's detail", responses=codeck_errors(404))
async def get_agent(service: ProactiveDep, agentId: str) -> OneProactiveAgent:
    return _one(service.detail(agentId))


@router.put(
    "/{agentId}",
    summary="Change an agent's configuration (only the fields given)",
    responses=codeck_errors(*BODY_ERRORS, 404, 503),
)
async def update_agent(
    service: ProactiveDep, agentId: str, body: UpdateAgentInput
) -> OneProactiveAgent:
    return _one(await service.update(agentId, body))


@router.post(
    "/{agentId}/pause",
    summary="Pause an agent (its schedule stops)",
    responses=codeck_errors(404, 503),
)
async def pause_agent(service: ProactiveDep, agentId: str) -> OneProactiveAgent:
    return _one(await service.pause(agentId))


@router.post(
    "/{agentId}/resume",
    summary="Resume an agent (failures reset, schedule restarts)",
    responses=codeck_errors(404, 503),
)
async def resume_agent(service: ProactiveDep, agentId: str) -> OneProactiveAgent:
    return _one(await service.resume(agentId))


@router.post(
    "/{agentId}/execute",
    status_code=202,
    summary="Run an agent now (queued)",
    responses=codeck_errors(404, 409, 503),
)
async def execute_agent(service: ProactiveDep, agentId: str) -> ProactiveRunQueued:
    queued = await service.trigger(agentId)
    return ProactiveRunQueued.model_validate({"ok": True, "agentId": agentId, **queued})


@router.delete(
    "/{agentId}", summary="Delete an agent and its files", responses=codeck_errors(404, 503)
)
async def delete_agent(service: ProactiveDep, agentId: str) -> ProactiveAgentDeleted:
    await service.delete(agentId)
    return ProactiveAgentDeleted(ok=True, id=agentId)


@router.get(
    "/{agentId}/logs",
    summary="An execution's clean log (text/plain): the newest, or ?executionId= or ?ts=",
    response_class=PlainTextResponse,
    responses=codeck_errors(404, 422),
)
async def agent_logs(
    service: ProactiveDep,
    agentId: str,
    executionId: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    ts: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_TS_MS,
            description="The execution that started then (its `startedAt`, Unix "
            "milliseconds), as seed 004's client asks; `executionId` wins when both are given",
        ),
    ] = None,
) -> FileResponse:
    if executionId is None and ts is not None:
        path = await service.log_path(agentId, started_at=ts)
    else:
        path = await service.log_path(agentId, executionId)
    return FileResponse(path, media_type="text/plain; charset=utf-8")


@router.get(
    "/{agentId}/executions",
    summary="Execution history, newest first",
    responses=codeck_errors(404, 422),
)
async def agent_executions(
    service: ProactiveDep,
    agentId: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> ExecutionList:
    executions = await service.executions(agentId, limit)
    return ExecutionList.model_validate({"ok": True, "agentId": agentId, "executions": executions})


@router.get(
    "/{agentId}/output",
    summary="The running (or last) execution's output so far (text/plain)",
    response_class=PlainTextResponse,
    responses=codeck_errors(404),
)
async def agent_output(service: ProactiveDep, agentId: str) -> PlainTextResponse:
    return PlainTextResponse(service.live_output(agentId))


@router.websocket("/ws")
async def agents_ws(
    websocket: WebSocket, service: ProactiveDep, configuration: ConfigurationDep
) -> None:
    """``{type, data}``: ``agent:list`` first, then updates, output, executions, misfires,
    and heartbeats."""
    await stream_messages(
        websocket,
        service,
        configuration.settings.proactive.ws_heartbeat_s,
        lambda service: {"type": "agent:list", "data": {"agents": service.summaries()}},
        lambda message: True,
    )


async def stream_messages(
    websocket: WebSocket,
    service: ProactiveService,
    interval_s: float,
    greeting: Callable[[ProactiveService], Message],
    wanted: Callable[[Message], bool],
) -> None:
    """The service's messages to one client: ``greeting`` first, then those ``wanted``,
    and a heartbeat whenever nothing was sent for ``interval_s`` (``proactive.wsHeartbeatS``).

    The clock of the heartbeat is what this client was sent, not what the service
    published: messages it does not want must not keep a client in silence.
    """
    listener = service.broadcaster.listen()  # before the snapshot: nothing falls in between
    await websocket.accept()

    async def until_disconnected() -> None:
        # Clients have nothing to say here (codeck's sends its terminals' messages,
        # which no terminal here reads): whatever comes, text or bytes, is drained.
        while (await websocket.receive())["type"] != "websocket.disconnect":
            pass

    receiver = asyncio.create_task(until_disconnected())
    receiver.add_done_callback(lambda _: listener.close())
    try:
        await websocket.send_json(greeting(service))
        sent_at = time.monotonic()
        while True:
            try:
                async with asyncio.timeout(sent_at + interval_s - time.monotonic()):
                    message = await listener.next()
            except TimeoutError:
                message = HEARTBEAT
            if message is None:
                break
            if message is HEARTBEAT or wanted(message):
                await websocket.send_json(message)
                sent_at = time.monotonic()
        if not receiver.done():
            code = WS_OVERFLOW_CODE if listener.overflowed else WS_GOING_AWAY_CODE
            await websocket.close(code=code)
    except (WebSocketDisconnect, OSError, RuntimeError):
        pass  # the client left while a message was being sent
    finally:
        listener.close()
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
            await receiver
