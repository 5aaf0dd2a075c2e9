"""Cron tasks over the API: list, add, remove, run now, enable, disable."""

from __future__ import annotations

from fastapi import APIRouter

from claybot.api.deps import CronDep
from claybot.api.errors import fields_in_body
from claybot.api.responses import BODY_ERRORS, errors
from claybot.cron.task import new_task_spec
from claybot.kernel.ids import new_id
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import AddCronTask
from claybot.wire.cron import CronRunQueued, CronTaskList, CronTaskRemoved, CronTaskSaved

router = APIRouter(prefix="/v1/engine/cron", route_class=AnswerRoute)


@router.get("/tasks", summary="Cron tasks, their next run, and TASK.md files that are invalid")
async def list_tasks(cron: CronDep) -> CronTaskList:
    problems = [problem.to_dict() for problem in cron.problems]
    return CronTaskList.model_validate({"ok": True, "tasks": cron.listing(), "problems": problems})


@router.post(
    "/tasks",
    status_code=201,
    summary="Create a cron task (written as TASK.md)",
    responses=errors(*BODY_ERRORS),
)
async def add_task(cron: CronDep, body: AddCronTask) -> CronTaskSaved:
    fields = body.model_dump(exclude={"prompt"}, exclude_none=True)
    with fields_in_body():
        spec = new_task_spec(new_id(), fields)
        task = await cron.add(spec, body.prompt)  # ScheduleError names its field
    return CronTaskSaved.model_validate({"ok": True, "task": task.to_dict()})


@router.delete(
    "/tasks/{taskId}", summary="Delete a cron task and its folder", responses=errors(404)
)
async def remove_task(cron: CronDep, taskId: str) -> CronTaskRemoved:
    task = await cron.remove(taskId)
    return CronTaskRemoved(ok=True, taskId=task.id)


@router.post(
    "/tasks/{taskId}/run",
    status_code=202,
    summary="Run a cron task now",
    responses=errors(404, 503),
)
async def run_task(cron: CronDep, taskId: str) -> CronRunQueued:
    key = await cron.run_now(taskId)
    return CronRunQueued(ok=True, taskId=taskId, messageId=key.message_id)


@router.post("/tasks/{taskId}/enable", summary="Enable a cron task", responses=errors(404))
async def enable_task(cron: CronDep, taskId: str) -> CronTaskSaved:
    task = await cron.set_enabled(taskId, True)
    return CronTaskSaved.model_validate({"ok": True, "task": task.to_dict()})


@router.post(
    "/tasks/{taskId}/disable",
    summary="Disable a cron task (it stays on disk)",
    responses=errors(404),
)
async def disable_task(cron: CronDep, taskId: str) -> CronTaskSaved:
    task = await cron.set_enabled(taskId, False)
    return CronTaskSaved.model_validate({"ok": True, "task": task.to_dict()})
