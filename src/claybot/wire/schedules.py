"""What cron and heartbeat tasks share on the wire: a gate, and a task file that is invalid."""

from __future__ import annotations

from pydantic import Field

from claybot.wire.base import Answer


class TaskGate(Answer):
    """A command run before the task: exit 0 runs it, anything else skips this run."""

    command: str
    timeoutMs: int


class TaskProblem(Answer):
    """A task file that could not be used; it is left as it is, and not run."""

    path: str
    reason: str = Field(description="What is wrong with it")
