"""Cron tools: agents create, read and delete scheduled tasks; cron agents keep a memory."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from claybot.agents.descriptors import CronDescriptor
from claybot.agents.system import AgentSystem
from claybot.cron.scheduler import CronScheduler
from claybot.cron.store import CronTask
from claybot.cron.task import MAX_PROMPT_CHARS, CronTaskNotFound, CronTaskSpec, Gate
from claybot.kernel.ids import new_id
from claybot.tools.base import AgentKind, ToolContext, ToolDefinition, ToolResult

CRON_ONLY: frozenset[AgentKind] = frozenset({"cron"})


class CronAdd(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    schedule: str = Field(min_length=1, max_length=256, description="5-field cron expression.")
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    timezone: str | None = Field(default=None, description="IANA zone; default: the engine's.")
    description: str = Field(default="", max_length=2000)
    agentId: str | None = Field(default=None, description="Run in this agent instead of its own.")
    enabled: bool = True
    deleteAfterRun: bool = False
    gate: Gate | None = Field(
        default=None,
        description="A command run before each run, like your exec (your folders, no "
        "network); exit 0 lets the run happen and its output joins the prompt.",
    )
    misfire: Literal["skip", "run-once"] = "run-once"
    overlap: Literal["skip", "queue"] = "skip"


class TaskRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    taskId: str | None = Field(default=None, description="Default: your own task (cron agents).")


class WriteMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    taskId: str | None = None
    content: str = Field(max_length=200_000)
    append: bool = False


class CronTools:
    def __init__(self, scheduler: CronScheduler, agents: AgentSystem) -> None:
        self._scheduler = scheduler
        self._agents = agents

    def definitions(self) -> list[ToolDefinition[Any]]:
        return [
            ToolDefinition("cron_add", "Create a scheduled task.", CronAdd, self.add),
            ToolDefinition(
                "cron_read_task", "Read a cron task's settings and prompt.", TaskRef, self.read
            ),
            ToolDefinition(
                "cron_delete_task", "Delete a cron task and its files.", TaskRef, self.delete
            ),
            ToolDefinition(
                "cron_read_memory",
                "Read your cron task's MEMORY.md.",
                TaskRef,
                self.read_memory,
                visible_to=CRON_ONLY,
            ),
            ToolDefinition(
                "cron_write_memory",
                "Replace (or append to) your cron task's MEMORY.md.",
                WriteMemory,
                self.write_memory,
                visible_to=CRON_ONLY,
            ),
        ]

    def _task(self, task_id: str | None, context: ToolContext) -> CronTask:
        if task_id is None:
            descriptor = self._agents.descriptor_of(context.agent_id)
            if not isinstance(descriptor, CronDescriptor):
                raise LookupError("name the task: taskId is required outside a cron agent")
            task_id = descriptor.id
        task = self._scheduler.tasks.get(task_id)
        if task is None:
            raise CronTaskNotFound(task_id)
        return task

    async def add(self, arguments: CronAdd, context: ToolContext) -> ToolResult:
        fields = arguments.model_dump(exclude={"prompt"}, exclude_none=True)
        try:
            spec = CronTaskSpec.model_validate(
                {"taskId": new_id(), **fields, "createdBy": context.agent_id}
            )
            if arguments.agentId is not None and not self._agents.exists(arguments.agentId):
                return ToolResult(f"No agent with id {arguments.agentId!r}.", is_error=True)
            task = await self._scheduler.add(spec, arguments.prompt)
        except (ValidationError, ValueError) as exc:  # ScheduleError is a ValueError
            return ToolResult(f"Invalid task: {exc}", is_error=True)
        upcoming = self._scheduler.next_run(task.id)
        when = upcoming.isoformat() if upcoming else "never (disabled)"
        return ToolResult(f"Cron task {task.id} created; next run {when}.")

    async def read(self, arguments: TaskRef, context: ToolContext) -> ToolResult:
        try:
            task = self._task(arguments.taskId, context)
        except LookupError as exc:
            return ToolResult(str(exc), is_error=True)
        spec = task.spec
        lines = [
            f"taskId: {spec.taskId}",
            f"name: {spec.name}",
            f"schedule: {spec.schedule} ({task.schedule.timezone})",
            f"enabled: {spec.enabled}",
            f"description: {spec.description}",
            "",
            task.prompt,
        ]
        return ToolResult("\n".join(lines))

    async def delete(self, arguments: TaskRef, context: ToolContext) -> ToolResult:
        try:
            task = await self._scheduler.remove(self._task(arguments.taskId, context).id)
        except LookupError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(f"Cron task {task.id} ({task.spec.name}) deleted.")

    async def read_memory(self, arguments: TaskRef, context: ToolContext) -> ToolResult:
        try:
            task = self._task(arguments.taskId, context)
        except LookupError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(await asyncio.to_thread(self._scheduler.store.read_memory, task))

    async def write_memory(self, arguments: WriteMemory, context: ToolContext) -> ToolResult:
        try:
            task = self._task(arguments.taskId, context)
            size = await asyncio.to_thread(
                self._scheduler.store.write_memory,
                task,
                arguments.content,
                append=arguments.append,
            )
        except (LookupError, ValueError) as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(f"MEMORY.md saved ({size} bytes).")
