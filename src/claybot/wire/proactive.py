"""Proactive agents (seed 004): their summaries, details, runs and executions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from claybot.proactive.models import AgentStatus, RunnerName, RunResult, Trigger
from claybot.wire.base import Answer, Ok, Omitted

MS = "Unix milliseconds"


class ProactiveAgentSummary(Answer):
    """``AgentSummary`` of seed 004, plus the time zone and the runner."""

    id: str
    name: str
    status: AgentStatus
    schedule: str
    timezone: str
    objective: str
    cwd: str
    model: str = Field(description='"": the runner\'s default')
    runner: RunnerName
    timeoutMs: int
    maxRetries: int
    lastExecutionAt: int | None = Field(description=MS)
    lastResult: RunResult | None
    nextRunAt: int | None = Field(description=MS)
    totalExecutions: int
    running: bool


class ProactiveAgentDetail(ProactiveAgentSummary):
    """``AgentDetail``: the summary plus failures, timestamps, misfires and queued runs."""

    consecutiveFailures: int
    createdAt: int = Field(description=MS)
    updatedAt: int = Field(description=MS)
    missedRuns: int = Field(description="Scheduled runs skipped while the engine was down")
    lastMissedAt: int | None = Field(description=MS)
    queuedRuns: int


class ProactiveAgentList(Ok):
    agents: list[ProactiveAgentSummary]


class OneProactiveAgent(Ok):
    agent: ProactiveAgentDetail


class ProactiveRunQueued(Ok):
    agentId: str
    executionId: str
    status: Literal["started", "queued"]
    position: int = Field(description="Place in the queue; 0 once started")
    running: bool


class ProactiveAgentDeleted(Ok):
    id: str


class Execution(Answer):
    """One run's ``ExecutionResult`` (seed 004)."""

    executionId: str
    agentId: str
    startedAt: int = Field(description=MS)
    completedAt: int = Field(description=MS)
    durationMs: int
    result: RunResult
    exitCode: int | None = Field(description="null: no exit code (killed, or not started)")
    outputLines: int
    error: str | Omitted = Field(default=None, description="Why it failed; only on failures")
    trigger: Trigger


class ExecutionList(Ok):
    agentId: str
    executions: list[Execution]
