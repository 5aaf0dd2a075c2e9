"""Heartbeat tasks over the API: list, add, remove, run now."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Body

from claybot.api.deps import HeartbeatDep
from claybot.api.errors import fields_in_body
from claybot.api.responses import BODY_ERRORS, errors
from claybot.kernel.errors import NotFound
from claybot.wire.base import AnswerRoute, Ok
from claybot.wire.bodies import AddHeartbeatTask, RunHeartbeat
from claybot.wire.heartbeat import (
    HeartbeatTaskList,
    HeartbeatTaskRemoved,
    HeartbeatTaskSaved,
)

router = APIRouter(prefix="/v1/engine/heartbeat", route_class=AnswerRoute)


@router.get("/tasks", summary="Heartbeat tasks, the last and the next beat")
async def list_tasks(heartbeat: HeartbeatDep) -> HeartbeatTaskList:
    listing = await heartbeat.listing()
    return HeartbeatTaskList.model_validate({"ok": True, **listing})


@router.post(
    "/tasks",
    status_code=201,
    summary="Add (or, with overwrite, replace) a task",
    responses=errors(*BODY_ERRORS, 409),
)
async def add_task(heartbeat: HeartbeatDep, body: AddHeartbeatTask) -> HeartbeatTaskSaved:
    with fields_in_body():
        task = await asyncio.to_thread(
            heartbeat.store.add,
            body.title,
            body.prompt,
            task_id=body.id,
            gate=body.gate,
            overwrite=body.overwrite,
        )
    return HeartbeatTaskSaved.model_validate({"ok": True, "task": task.to_dict()})


@router.delete("/tasks/{taskId}", summary="Remove a heartbeat task", responses=errors(404))
async def remove_task(heartbeat: HeartbeatDep, taskId: str) -> HeartbeatTaskRemoved:
    await asyncio.to_thread(heartbeat.store.remove, taskId)
    return HeartbeatTaskRemoved(ok=True, taskId=taskId)


@router.post(
    "/run",
    status_code=202,
    summary="Run the heartbeat now (all or some tasks)",
    responses=errors(*BODY_ERRORS, 404),
)
async def run(heartbeat: HeartbeatDep, body: Annotated[RunHeartbeat | None, Body()] = None) -> Ok:
    ids = body.ids if body else None
    unknown = await heartbeat.unknown(ids) if ids else []
    if unknown:
        names = ", ".join(f"'{task_id}'" for task_id in unknown)
        raise NotFound(f"no heartbeat task {names}", field="ids")
    heartbeat.run_now(ids)
    return Ok(ok=True)
