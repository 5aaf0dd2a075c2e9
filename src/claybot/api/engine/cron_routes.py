"""Cron tasks over the API: list, add, remove, run now, enable, disable."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ValidationError

from claybot.api.engine.routes import engine_of
from claybot.api.errors import fields_in_body
from claybot.api.responses import BODY_ERRORS, errors
from claybot.cron.task import CronTaskSpec
from claybot.kernel.errors import InvalidInput
from claybot.kernel.ids import new_id
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import AddCronTask
from claybot.wire.cron import CronRunQueued, CronTaskList, CronTaskRemoved, CronTaskSaved

router = APIRouter(prefix="/v1/engine/cron", route_class=AnswerRoute)


@router.get("/tasks", summary="Cron tasks, their next run, and TASK.md files that are invalid")
async def list_tasks(request: Request) -> CronTaskList:
    cron = engine_of(request).cron
    problems = [problem.to_dict() for problem in cron.problems]
    return CronTaskList.model_validate({"ok": True, "tasks": cron.listing(), "problems": problems})


@router.post(
    "/tasks",
    status_code=201,
    summary="Create a cron task (written as TASK.md)",
    responses=errors(*BODY_ERRORS),
)
async def add_task(request: Request, body: AddCronTask) -> CronTaskSaved:
    engine = engine_of(request)
    fields = body.model_dump(exclude={"prompt"}, exclude_none=True)
    with fields_in_body():
        try:
            spec = CronTaskSpec.model_validate({"taskId": new_id(), **fields})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise InvalidInput(f"{where}: {error['msg']}", field=where) from exc
        task = await engine.cron.add(spec, body.prompt)  # ScheduleError names its field
    return CronTaskSaved.model_validate({"ok": True, "task": task.to_dict()})


@router.delete(
    "/tasks/{taskId}", summary="Delete a cron task and its folder", responses=errors(404)
)
async def remove_task(request: Request, taskId: str) -> CronTaskRemoved:
    task = await engine_of(request).cron.remove(taskId)
    return CronTaskRemoved(ok=True, taskId=task.id)


@router.post(
    "/tasks/{taskId}/run",
    status_code=202,
    summary="Run a cron task now",
    responses=errors(404, 503),
)
async def run_task(request: Request, taskId: str) -> CronRunQueued:
    key = await engine_of(request).cron.run_now(taskId)
    return CronRunQueued(ok=True, taskId=taskId, messageId=key.message_id)


async def _set_enabled(request: Request, task_id: str, enabled: bool) -> CronTaskSaved:
    task = await engine_of(request).cron.set_enabled(task_id, enabled)
    return CronTaskSaved.model_validate({"ok": True, "task": task.to_dict()})


@router.post("/tasks/{taskId}/enable", summary="Enable a cron task", responses=errors(404))
async def enable_task(request: Request, taskId: str) -> CronTaskSaved:
    return await _set_enabled(request, taskId, True)


@router.post(
    "/tasks/{taskId}/disable",
    summary="Disable a cron task (it stays on disk)",
    responses=errors(404),
)
async def disable_task(request: Request, taskId: str) -> CronTaskSaved:
    return await _set_enabled(request, taskId, False)
