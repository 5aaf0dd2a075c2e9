"""Heartbeat tools: agents add, list, remove and run the heartbeat's tasks."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claybot.cron.task import Gate
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.heartbeat.store import HeartbeatTaskError, HeartbeatTaskNotFound
from claybot.tools.base import ToolContext, ToolDefinition, ToolResult


class HeartbeatAdd(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=200)
    prompt: str = Field(min_length=1, max_length=32_000)
    id: str | None = Field(default=None, description="Default: made from the title.")
    gate: Gate | None = Field(
        default=None,
        description="A command run before each beat, like your exec (your folders, no "
        "network); exit 0 includes the task and its output.",
    )
    overwrite: bool = False


class HeartbeatRemove(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64)


class HeartbeatRun(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[str] | None = Field(default=None, description="Default: every task.")


class NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HeartbeatTools:
    def __init__(self, scheduler: HeartbeatScheduler) -> None:
        self._scheduler = scheduler

    def definitions(self) -> list[ToolDefinition[Any]]:
        return [
            ToolDefinition(
                "heartbeat_add", "Add (or replace) a heartbeat task.", HeartbeatAdd, self.add
            ),
            ToolDefinition("heartbeat_list", "List the heartbeat tasks.", NoArguments, self.list),
            ToolDefinition(
                "heartbeat_remove", "Remove a heartbeat task.", HeartbeatRemove, self.remove
            ),
            ToolDefinition(
                "heartbeat_run",
                "Run the heartbeat now (all or some tasks).",
                HeartbeatRun,
                self.run,
            ),
        ]

    async def add(self, arguments: HeartbeatAdd, context: ToolContext) -> ToolResult:
        try:
            task = await asyncio.to_thread(
                self._scheduler.store.add,
                arguments.title,
                arguments.prompt,
                task_id=arguments.id,
                gate=arguments.gate,
                overwrite=arguments.overwrite,
                created_by=context.agent_id,
            )
        except HeartbeatTaskError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(f"Heartbeat task {task.id} saved.")

    async def list(self, arguments: BaseModel, context: ToolContext) -> ToolResult:
        listing = await self._scheduler.listing()
        lines = [f"{task['id']}\t{task['title']}" for task in listing["tasks"]]
        lines.append(f"last run: {listing['tasks'][0]['lastRunAt'] if listing['tasks'] else None}")
        lines.append(f"next run: {listing['nextRunAt']}")
        return ToolResult("\n".join(lines))

    async def remove(self, arguments: HeartbeatRemove, context: ToolContext) -> ToolResult:
        try:
            await asyncio.to_thread(self._scheduler.store.remove, arguments.id)
        except HeartbeatTaskNotFound as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(f"Heartbeat task {arguments.id} removed.")

    async def run(self, arguments: HeartbeatRun, context: ToolContext) -> ToolResult:
        unknown = await self._scheduler.unknown(arguments.ids) if arguments.ids else []
        if unknown:
            names = ", ".join(f"'{task_id}'" for task_id in unknown)
            return ToolResult(f"No heartbeat task {names}.", is_error=True)
        self._scheduler.run_now(arguments.ids)
        return ToolResult("The heartbeat will run now; its tasks report when done.")
