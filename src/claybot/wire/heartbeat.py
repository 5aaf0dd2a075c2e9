"""Heartbeat tasks (``heartbeat/<id>.md``), run together on each beat."""

from __future__ import annotations

from pydantic import Field

from claybot.wire.base import Answer, Ok
from claybot.wire.schedules import TaskGate, TaskProblem


class HeartbeatTask(Answer):
    id: str
    title: str
    prompt: str
    gate: TaskGate | None
    path: str
    lastRunAt: str | None = Field(description="ISO 8601: the last beat, one time for all tasks")


class HeartbeatTaskList(Ok):
    tasks: list[HeartbeatTask]
    problems: list[TaskProblem]
    nextRunAt: str = Field(description="ISO 8601")
    intervalS: float


class HeartbeatTaskSaved(Ok):
    task: HeartbeatTask


class HeartbeatTaskRemoved(Ok):
    taskId: str


class HeartbeatTaskFiles(Ok):
    """The listing as the CLI reads it from the task files when no engine runs: the
    engine's, but no beat is scheduled (``nextRunAt`` null). Never an API answer."""

    tasks: list[HeartbeatTask]
    problems: list[TaskProblem]
    nextRunAt: None
    intervalS: float
