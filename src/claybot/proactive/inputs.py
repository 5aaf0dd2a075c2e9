"""Request bodies for creating and editing proactive agents.

Unknown fields are rejected (an edit can never set ``id``, ``createdAt`` or the
state), numbers are strict (``true`` is not a timeout), and every check that
needs no engine state happens here, so the error names the field. The checks
that do (``cwd`` inside the workspace, the schedule in its time zone, the agent
limit) are the service's.
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from claybot.proactive.models import (
    MODEL_PATTERN,
    NAME_MAX_CHARS,
    OBJECTIVE_MAX_CHARS,
    RunnerName,
)
from claybot.scheduling.schedule import CronSchedule, ScheduleError, parse_zone

CWD_MAX_CHARS = 1024
TIMEOUT_MS_MIN = 1000
TIMEOUT_MS_MAX = 24 * 3600 * 1000
MAX_RETRIES_MAX = 100


def _name(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("must not be empty")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError("must not contain control characters")
    return value


def _objective(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _schedule(value: str) -> str:
    try:
        return CronSchedule.parse(value).expression  # the time zone is checked on its own
    except ScheduleError as exc:
        raise ValueError(str(exc)) from exc


def _timezone(value: str) -> str:
    try:
        parse_zone(value)
    except ScheduleError as exc:
        raise ValueError(str(exc)) from exc
    return value


def _cwd(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


class AgentChanges(TypedDict, total=False):
    """What an edit changes in an ``AgentConfig``: a key left out keeps its value."""

    name: str
    objective: str
    schedule: str
    cwd: str  # as given; the service resolves it inside the workspace
    model: str  # "": the runner's default
    timeoutMs: int
    maxRetries: int
    timezone: str
    runner: RunnerName


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateAgentInput(_Body):
    name: str = Field(min_length=1, max_length=NAME_MAX_CHARS)
    objective: str = Field(min_length=1, max_length=OBJECTIVE_MAX_CHARS)
    schedule: str = Field(min_length=1, max_length=256)
    cwd: str | None = Field(default=None, max_length=CWD_MAX_CHARS)
    model: str | None = Field(default=None, pattern=MODEL_PATTERN)
    timeoutMs: int | None = Field(default=None, strict=True, ge=TIMEOUT_MS_MIN, le=TIMEOUT_MS_MAX)
    maxRetries: int | None = Field(default=None, strict=True, ge=1, le=MAX_RETRIES_MAX)
    timezone: str | None = Field(default=None, max_length=64)
    runner: RunnerName = "claude"

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return _name(value)

    @field_validator("objective")
    @classmethod
    def _check_objective(cls, value: str) -> str:
        return _objective(value)

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str) -> str:
        return _schedule(value)

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str | None) -> str | None:
        return None if value is None else _timezone(value)

    @field_validator("cwd")
    @classmethod
    def _check_cwd(cls, value: str | None) -> str | None:
        return None if value is None else _cwd(value)


class UpdateAgentInput(_Body):
    """Only the fields present change; ``null`` is refused except for ``model`` (the default)."""

    name: str | None = Field(default=None, min_length=1, max_length=NAME_MAX_CHARS)
    objective: str | None = Field(default=None, min_length=1, max_length=OBJECTIVE_MAX_CHARS)
    schedule: str | None = Field(default=None, min_length=1, max_length=256)
    cwd: str | None = Field(default=None, max_length=CWD_MAX_CHARS)
    model: str | None = Field(default=None, pattern=MODEL_PATTERN)
    timeoutMs: int | None = Field(default=None, strict=True, ge=TIMEOUT_MS_MIN, le=TIMEOUT_MS_MAX)
    maxRetries: int | None = Field(default=None, strict=True, ge=1, le=MAX_RETRIES_MAX)
    timezone: str | None = Field(default=None, max_length=64)
    runner: RunnerName | None = None

    @field_validator(
        "name", "objective", "schedule", "cwd", "timeoutMs", "maxRetries", "timezone", "runner",
        mode="before",
    )  # fmt: skip
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("may not be null; leave the field out to keep its value")
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        return None if value is None else _name(value)

    @field_validator("objective")
    @classmethod
    def _check_objective(cls, value: str | None) -> str | None:
        return None if value is None else _objective(value)

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str | None) -> str | None:
        return None if value is None else _schedule(value)

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str | None) -> str | None:
        return None if value is None else _timezone(value)

    @field_validator("cwd")
    @classmethod
    def _check_cwd(cls, value: str | None) -> str | None:
        return None if value is None else _cwd(value)

    def changes(self) -> AgentChanges:
        """The fields the request sets, with ``model: null`` meaning the default ("").
        Every other field is None only when left out, since its null is refused."""
        changes: AgentChanges = {}
        if self.name is not None:
            changes["name"] = self.name
        if self.objective is not None:
            changes["objective"] = self.objective
        if self.schedule is not None:
            changes["schedule"] = self.schedule
        if self.cwd is not None:
            changes["cwd"] = self.cwd
        if "model" in self.model_fields_set:
            changes["model"] = self.model or ""
        if self.timeoutMs is not None:
            changes["timeoutMs"] = self.timeoutMs
        if self.maxRetries is not None:
            changes["maxRetries"] = self.maxRetries
        if self.timezone is not None:
            changes["timezone"] = self.timezone
        if self.runner is not None:
            changes["runner"] = self.runner
        return changes
