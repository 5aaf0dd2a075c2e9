"""``TASK.md``: YAML front matter describing a cron task, and the prompt as its body (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from claybot.kernel.errors import InvalidInput, NotFound
from claybot.kernel.frontmatter import FrontMatterError, join_front_matter, split_front_matter
from claybot.scheduling.schedule import FIELD_COUNT

SLUG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_PROMPT_CHARS = 32_000
# Front-matter fields that are read and deliberately ignored: a task file must not be
# able to grant its agent anything (the original project's escalation bug).
IGNORED_FIELDS = frozenset({"permissions"})


class CronTaskNotFound(NotFound, LookupError):
    code = "task_not_found"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no cron task with id {task_id!r}", field="taskId")
        self.task_id = task_id


class TaskFileError(ValueError):
    """A TASK.md that cannot be used, with the reason (reported with its path)."""


class GateFields(TypedDict):
    """A gate as listings show it (``wire.schedules.TaskGate``)."""

    command: str
    timeoutMs: int


class Gate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1, max_length=4000)
    timeoutMs: int = Field(default=30_000, ge=100, le=300_000)

    def fields(self) -> GateFields:
        return {"command": self.command, "timeoutMs": self.timeoutMs}


class CronTaskSpec(BaseModel):
    """The front matter. Field names are the file's (camelCase)."""

    model_config = ConfigDict(extra="forbid")
    taskId: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    name: str = Field(min_length=1, max_length=200)
    schedule: str = Field(min_length=1, max_length=256)
    timezone: str | None = Field(default=None, max_length=64)
    enabled: bool = True
    description: str = Field(default="", max_length=2000)
    deleteAfterRun: bool = False
    agentId: str | None = Field(default=None, min_length=1, max_length=64)
    gate: Gate | None = None
    misfire: Literal["skip", "run-once"] = "run-once"
    overlap: Literal["skip", "queue"] = "skip"
    # The agent whose tool call made the task: its gate runs with that agent's grants,
    # and its cron agent starts with no more than them. Absent: the owner wrote it.
    createdBy: str | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("schedule")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        # Only the shape here: the expression and its zone are parsed together once
        # the zone is known (CronSchedule.parse), which reports any other mistake.
        fields = value.split()
        if len(fields) != FIELD_COUNT:
            raise ValueError(
                f"{value!r} must have 5 fields: minute hour day-of-month month day-of-week"
            )
        return " ".join(fields)


def new_task_spec(task_id: str, fields: Mapping[str, Any]) -> CronTaskSpec:
    """A new task's front matter from what a client sent: ``InvalidInput`` naming the
    first field that is wrong (the schedule's expression and zone are checked when the
    task is added)."""
    try:
        return CronTaskSpec.model_validate({"taskId": task_id, **fields})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise InvalidInput(f"{where}: {error['msg']}", field=where) from exc


def parse_task_file(text: str) -> tuple[CronTaskSpec, str]:
    """(front matter, prompt) or TaskFileError naming what is wrong."""
    try:
        raw, prompt = split_front_matter(text)
    except FrontMatterError as exc:
        raise TaskFileError(str(exc)) from exc
    fields: dict[str, Any] = {k: v for k, v in raw.items() if k not in IGNORED_FIELDS}
    try:
        spec = CronTaskSpec.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'front matter'}: {error['msg']}"
            for error in exc.errors()
        )
        raise TaskFileError(problems) from exc
    if not prompt:
        raise TaskFileError("the prompt (the text after the front matter) is empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise TaskFileError(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
    return spec, prompt


def render_task_file(spec: CronTaskSpec, prompt: str) -> str:
    return join_front_matter(spec.model_dump(exclude_none=True), prompt)


def slugify(name: str) -> str:
    """A folder name for a task: lowercase letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48].strip("-")
    return slug or "task"
