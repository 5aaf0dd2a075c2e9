"""Cron tasks (``cron/<slug>/TASK.md``) as the API shows them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from claybot.wire.base import Answer, Ok
from claybot.wire.schedules import TaskGate, TaskProblem


class CronTask(Answer):
    """The task file's front matter, its zone, where it lives and its prompt."""

    taskId: str
    name: str
    schedule: str
    timezone: str = Field(description="The task's zone, or the engine's when it names none")
    enabled: bool
    description: str
    deleteAfterRun: bool
    agentId: str | None = Field(description="The agent its runs go to; null: its own")
    gate: TaskGate | None
    misfire: Literal["skip", "run-once"]
    overlap: Literal["skip", "queue"]
    createdBy: str | None = Field(description="The agent whose tool call made it; null: you")
    slug: str = Field(description="Its folder under cron/")
    path: str
    prompt: str


class CronRun(Answer):
    at: int = Field(description="The scheduled instant, unix milliseconds")
    status: Literal["ran", "failed", "skipped"] | None
    finishedAt: int | None = Field(description="Unix milliseconds")


class CronTaskListing(CronTask):
    nextRunAt: str | None = Field(description="ISO 8601; null when disabled")
    lastRun: CronRun | None
    running: bool
    id: str = Field(description="`taskId` (seed 000's name for it)")
    lastRunAt: str | None = Field(
        description="ISO 8601: the scheduled instant of the last run (`lastRun.at`, seed "
        "000's name for it); null: never ran"
    )


class CronTaskList(Ok):
    tasks: list[CronTaskListing]
    problems: list[TaskProblem]


class CronTaskSaved(Ok):
    task: CronTask


class CronTaskRemoved(Ok):
    taskId: str


class CronRunQueued(Ok):
    taskId: str
    messageId: str = Field(description="The run's message to the task's agent")
