"""Proactive agents on disk and on the wire (seed 004's field names, camelCase).

``AgentConfig`` is what the owner chose, ``AgentState`` what the engine
observed, ``ExecutionResult`` one run. Times are unix milliseconds, as in the
seed. Pure: no I/O.

What goes out is typed by the TypedDicts ``AgentSummary``, ``AgentDetail``,
``ExecutionRecord`` and ``RunQueued``: the wire models they feed
(``claybot.wire.proactive``) sit above this layer, so the routes validate these
into them, and the WebSocket sends them as they are. Their fields are written in
the order the answers always had.
"""

from __future__ import annotations

import re
from typing import Literal, NotRequired, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field

AgentStatus = Literal["active", "paused", "error"]
RunResult = Literal["success", "failure", "timeout"]
RunnerName = Literal["claude", "engine"]
Trigger = Literal["schedule", "manual"]

# Ids travel into paths: generated ids are 8 hex characters; a hand-made folder
# found by a directory scan must still be a plain, bounded name.
AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
AGENT_ID_RE = re.compile(AGENT_ID_PATTERN)
NAME_MAX_CHARS = 50
OBJECTIVE_MAX_CHARS = 10_000
# Claude model aliases (opus, sonnet, haiku) or full names; never an option (no leading dash).
MODEL_PATTERN = r"^(|[A-Za-z0-9][A-Za-z0-9._:\[\]-]{0,99})$"


class _Stored(BaseModel):
    # Unknown keys in a file written by a newer engine are kept, not fatal.
    model_config = ConfigDict(extra="allow")


class AgentConfig(_Stored):
    id: str = Field(pattern=AGENT_ID_PATTERN)
    name: str = Field(min_length=1, max_length=NAME_MAX_CHARS)
    objective: str = Field(min_length=1, max_length=OBJECTIVE_MAX_CHARS)
    schedule: str = Field(min_length=1, max_length=256)
    cwd: str = Field(min_length=1)
    model: str = Field(default="", pattern=MODEL_PATTERN)  # "" = the CLI's default
    timeoutMs: int = Field(ge=1)
    maxRetries: int = Field(ge=1)
    createdAt: int
    updatedAt: int
    timezone: str = "UTC"
    runner: RunnerName = "claude"


class AgentState(_Stored):
    status: AgentStatus = "active"
    consecutiveFailures: int = Field(default=0, ge=0)
    lastExecutionAt: int | None = None
    lastResult: RunResult | None = None
    totalExecutions: int = Field(default=0, ge=0)
    nextRunAt: int | None = None
    # Scheduled runs skipped because the engine was down (or far too late) when they were due.
    missedRuns: int = Field(default=0, ge=0)
    lastMissedAt: int | None = None
    # Manual runs accepted but not started yet: a restart queues them again, never drops them.
    pendingRuns: list[str] = Field(default_factory=list)


class ExecutionResult(_Stored):
    executionId: str
    agentId: str
    startedAt: int
    completedAt: int
    durationMs: int
    result: RunResult
    exitCode: int | None
    outputLines: int
    error: str | None = None
    trigger: Trigger = "schedule"

    def to_wire(self) -> ExecutionRecord:
        """As the result file and the clients have it: a dump, not a literal, so a field a
        newer engine wrote is kept (and rewritten) rather than dropped."""
        data = self.model_dump(mode="json")
        if data.get("error") is None:
            data.pop("error", None)  # the seed's ``error?``: only on failures
        return cast(ExecutionRecord, data)


class ExecutionRecord(TypedDict):
    """One run's ``ExecutionResult`` (seed 004; wire: ``Execution``)."""

    executionId: str
    agentId: str
    startedAt: int
    completedAt: int
    durationMs: int
    result: RunResult
    exitCode: int | None
    outputLines: int
    error: NotRequired[str]  # only on failures
    trigger: Trigger


class AgentSummary(TypedDict):
    """``AgentSummary`` of the seed, plus the time zone and the runner
    (wire: ``ProactiveAgentSummary``)."""

    id: str
    name: str
    status: AgentStatus
    schedule: str
    timezone: str
    objective: str
    cwd: str
    model: str
    runner: RunnerName
    timeoutMs: int
    maxRetries: int
    lastExecutionAt: int | None
    lastResult: RunResult | None
    nextRunAt: int | None
    totalExecutions: int
    running: bool


class AgentDetail(AgentSummary):
    """``AgentDetail``: the summary plus failures, timestamps, misfires and queued runs
    (wire: ``ProactiveAgentDetail``)."""

    consecutiveFailures: int
    createdAt: int
    updatedAt: int
    missedRuns: int
    lastMissedAt: int | None
    queuedRuns: int


class RunQueued(TypedDict):
    """A manual run accepted (wire: ``ProactiveRunQueued``, which adds ``ok`` and the
    agent's id)."""

    executionId: str
    status: Literal["started", "queued"]
    position: int  # place in the queue; 0 once started
    running: bool


def summary(config: AgentConfig, state: AgentState, *, running: bool) -> AgentSummary:
    """``AgentSummary`` of the seed, plus the time zone and the runner."""
    return {
        "id": config.id,
        "name": config.name,
        "status": state.status,
        "schedule": config.schedule,
        "timezone": config.timezone,
        "objective": config.objective,
        "cwd": config.cwd,
        "model": config.model,
        "runner": config.runner,
        "timeoutMs": config.timeoutMs,
        "maxRetries": config.maxRetries,
        "lastExecutionAt": state.lastExecutionAt,
        "lastResult": state.lastResult,
        "nextRunAt": state.nextRunAt,
        "totalExecutions": state.totalExecutions,
        "running": running,
    }


def detail(
    config: AgentConfig, state: AgentState, *, running: bool, queued: int = 0
) -> AgentDetail:
    """``AgentDetail``: the summary plus failures, timestamps, misfires and queued runs."""
    return {
        **summary(config, state, running=running),
        "consecutiveFailures": state.consecutiveFailures,
        "createdAt": config.createdAt,
        "updatedAt": config.updatedAt,
        "missedRuns": state.missedRuns,
        "lastMissedAt": state.lastMissedAt,
        "queuedRuns": queued,
    }
