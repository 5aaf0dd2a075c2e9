"""The proactive agents service: lifecycle, schedule, execution queue (seed 004).

- Lifecycle: ``active`` (scheduled), ``paused`` (not scheduled; a manual run
  still runs, and the agent stays paused), ``error`` (auto-paused after
  ``maxRetries`` consecutive failures). Resume makes it active with its failures
  reset; delete stops it, ends a running execution and removes its files.
- Queue: FIFO, at most ``max_concurrent`` executions at once across all agents,
  one at a time per agent. A scheduled tick on an agent that is running (or
  already queued) is skipped with ``agent:skipped``; a manual trigger is always
  queued, persisted before it is acknowledged, and survives a restart.
- Schedule: each agent's cron expression in its own time zone (DST-correct),
  one timer task for all agents. ``nextRunAt`` is saved before a run starts, so
  a crash never runs one scheduled time twice; scheduled times missed while the
  engine was down are skipped with ``agent:misfire``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from claybot.config.settings import ProactiveSettings
from claybot.engine.cron.clock import Clock, SystemClock, from_ms, to_ms
from claybot.engine.cron.schedule import CronSchedule, ScheduleError
from claybot.proactive.broadcast import Broadcaster
from claybot.proactive.errors import (
    AgentLimitReached,
    AgentNotFound,
    InvalidAgentInput,
    NothingToShow,
    ProactiveError,
    RunQueueFull,
    ServiceStopping,
)
from claybot.proactive.inputs import CreateAgentInput, UpdateAgentInput
from claybot.proactive.models import (
    AgentConfig,
    AgentState,
    ExecutionResult,
    Trigger,
    detail,
    summary,
)
from claybot.proactive.output import ExecutionOutput, LiveBuffer
from claybot.proactive.redact import Redactor
from claybot.proactive.runner import Runner, RunOutcome, RunRequest
from claybot.proactive.store import ExecutionFiles, ProactiveStore, execution_stamp
from claybot.proactive.timer import DueTimer

log = logging.getLogger(__name__)

# A tick this late (the loop was blocked, the machine slept) counts as missed, not run.
MISFIRE_GRACE_S = 60.0
MAX_QUEUED_PER_AGENT = 10
INTERRUPTED = "interrupted: the engine stopped during this run"

EventHook = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class ServiceLimits:
    max_agents: int = 10
    max_concurrent: int = 2
    timeout_ms: int = 300_000
    max_retries: int = 3
    default_timezone: str = "UTC"

    @classmethod
    def from_settings(cls, settings: ProactiveSettings, engine_timezone: str) -> ServiceLimits:
        return cls(
            max_agents=settings.max_agents,
            max_concurrent=settings.max_concurrent,
            timeout_ms=settings.timeout_ms,
            max_retries=settings.max_retries,
            default_timezone=settings.default_timezone or engine_timezone,
        )


@dataclass
class _Agent:
    config: AgentConfig
    state: AgentState
    schedule: CronSchedule
    live: LiveBuffer = field(default_factory=LiveBuffer)
    save_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    deleted: bool = False

    @property
    def id(self) -> str:
        return self.config.id


@dataclass(frozen=True)
class QueuedRun:
    agent_id: str
    execution_id: str
    trigger: Trigger
    scheduled_at: datetime | None = None


@dataclass
class _Running:
    run: QueuedRun
    task: asyncio.Task[None]


class ProactiveService:
    def __init__(
        self,
        store: ProactiveStore,
        runners: Mapping[str, Runner],
        *,
        workspace: Path,
        limits: ServiceLimits | None = None,
        clock: Clock | None = None,
        redactor: Callable[[str], str] | None = None,
        on_event: EventHook | None = None,
        new_agent_id: Callable[[], str] = lambda: secrets.token_hex(4),
        new_execution_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.store = store
        self.runners = dict(runners)
        self.workspace = workspace
        self.limits = limits or ServiceLimits()
        self.clock = clock or SystemClock()
        self.redact = redactor or Redactor()
        self.broadcaster = Broadcaster()
        self._on_event = on_event
        self._new_agent_id = new_agent_id
        self._new_execution_id = new_execution_id
        self._agents: dict[str, _Agent] = {}
        self._queue: list[QueuedRun] = []
        self._running: dict[str, _Running] = {}
        self._timer = DueTimer(self.clock, self._on_due)
        self._mutations = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self._started = False
        self._stopping = False

    # -- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self._prepare_dirs)
        report = await asyncio.to_thread(self.store.load)
        now = self.clock.now()
        misfires: list[tuple[_Agent, int, int]] = []
        for stored in report.agents:
            config, state = stored.config, stored.state
            try:
                schedule = CronSchedule.parse(config.schedule, config.timezone)
            except ScheduleError as exc:
                log.warning(
                    "proactive agent %s skipped: %s", config.id, exc,
                    extra={"action": "proactive.agent_invalid", "agentId": config.id},
                )  # fmt: skip
                continue
            agent = _Agent(config, state, schedule)
            self._agents[config.id] = agent
            if state.status == "active":
                if state.nextRunAt is not None and state.nextRunAt < to_ms(now):
                    missed = self._count_missed(agent, from_ms(state.nextRunAt), now)
                    misfires.append((agent, state.nextRunAt, missed))
                self._reschedule(agent, now)
            else:
                state.nextRunAt = None
            for execution_id in state.pendingRuns:
                self._queue.append(QueuedRun(config.id, execution_id, "manual"))
        for interrupted in report.interrupted:
            self._notify("agent:execution:interrupted", interrupted.to_wire())
        await asyncio.gather(*(self._save_state(agent) for agent in self._agents.values()))
        for agent, scheduled_ms, missed in misfires:
            self._misfire(agent, scheduled_ms, missed, now)
        self._started = True
        self._timer.start()
        self._dispatch()
        log.info(
            "proactive agents started",
            extra={
                "action": "proactive.started",
                "agents": len(self._agents),
                "manifest": report.manifest_source,
                "skipped": len(report.skipped),
            },
        )

    def _prepare_dirs(self) -> None:
        self.store.ensure()
        self.workspace.mkdir(parents=True, exist_ok=True)

    async def stop(self) -> None:
        """Stop the schedule, end running executions (SIGTERM, then SIGKILL), save state."""
        self._stopping = True
        await self._timer.stop()
        self._queue.clear()  # manual runs stay in state.pendingRuns for the next start
        running = [entry.task for entry in self._running.values()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await task
        await asyncio.gather(
            *(self._save_state(agent) for agent in self._agents.values()), return_exceptions=True
        )
        self.broadcaster.close()

    # -- reading ------------------------------------------------------------------

    def _get(self, agent_id: str) -> _Agent:
        agent = self._agents.get(agent_id)
        if agent is None or agent.deleted:
            raise AgentNotFound(agent_id)
        return agent

    def is_running(self, agent_id: str) -> bool:
        return agent_id in self._running

    def _queued_count(self, agent_id: str) -> int:
        return sum(1 for run in self._queue if run.agent_id == agent_id)

    def summaries(self) -> list[dict[str, Any]]:
        return [
            summary(a.config, a.state, running=self.is_running(a.id))
            for a in sorted(self._agents.values(), key=lambda a: a.config.createdAt)
        ]

    def detail(self, agent_id: str) -> dict[str, Any]:
        agent = self._get(agent_id)
        return detail(
            agent.config,
            agent.state,
            running=self.is_running(agent_id),
            queued=self._queued_count(agent_id),
        )

    def running_count(self) -> int:
        return len(self._running)

    async def executions(self, agent_id: str, limit: int) -> list[dict[str, Any]]:
        self._get(agent_id)
        results = await asyncio.to_thread(self.store.results, agent_id, limit)
        return [result.to_wire() for result in results]

    async def log_path(self, agent_id: str, execution_id: str | None = None) -> Path:
        """The ``.log`` of the newest execution, or of the one with this id."""
        self._get(agent_id)
        stamp: str | None = None
        if execution_id is not None:
            results = await asyncio.to_thread(self.store.results, agent_id, 10_000)
            match = next((r for r in results if r.executionId == execution_id), None)
            if match is None:
                raise NothingToShow(f"no execution {execution_id!r} for this agent", "executionId")
            stamp = execution_stamp(match.startedAt)
        path = await asyncio.to_thread(self.store.log_path, agent_id, stamp)
        if path is None:
            raise NothingToShow("this agent has no execution log yet", "id")
        return path

    def live_output(self, agent_id: str) -> str:
        text = self._get(agent_id).live.text()
        if not text:
            raise NothingToShow("this agent has produced no output yet", "id")
        return text

    # -- changes ----------------------------------------------------------------------

    async def create(self, body: CreateAgentInput) -> dict[str, Any]:
        self._refuse_if_stopping()
        async with self._mutations:
            if len(self._agents) >= self.limits.max_agents:
                raise AgentLimitReached(
                    f"at most {self.limits.max_agents} proactive agents are allowed "
                    "(settings: proactive.maxAgents)"
                )
            timezone = body.timezone or self.limits.default_timezone
            schedule = _parse_schedule(body.schedule, timezone)
            cwd = await asyncio.to_thread(self.resolve_cwd, body.cwd)
            _check_objective(body.objective, body.runner)
            now_ms = to_ms(self.clock.now())
            config = AgentConfig(
                id=await asyncio.to_thread(self._fresh_id),
                name=body.name,
                objective=body.objective,
                schedule=schedule.expression,
                cwd=cwd,
                model=body.model or "",
                timeoutMs=body.timeoutMs or self.limits.timeout_ms,
                maxRetries=body.maxRetries or self.limits.max_retries,
                createdAt=now_ms,
                updatedAt=now_ms,
                timezone=timezone,
                runner=body.runner,
            )
            agent = _Agent(config, AgentState(status="active"), schedule)
            self._reschedule(agent, self.clock.now())
            ids = [*self._agents, config.id]
            await asyncio.to_thread(self.store.create, config, agent.state, ids)
            self._agents[config.id] = agent
        self._publish_update(agent)
        log.info(
            "proactive agent created",
            extra={"action": "proactive.created", "agentId": config.id, "runner": config.runner},
        )
        return self.detail(config.id)

    async def update(self, agent_id: str, body: UpdateAgentInput) -> dict[str, Any]:
        self._refuse_if_stopping()
        async with self._mutations:
            agent = self._get(agent_id)
            changes = body.changes()
            if "cwd" in changes:
                changes["cwd"] = await asyncio.to_thread(self.resolve_cwd, changes["cwd"])
            merged = agent.config.model_copy(update=changes)
            schedule = _parse_schedule(merged.schedule, merged.timezone)
            _check_objective(merged.objective, merged.runner)
            merged.updatedAt = to_ms(self.clock.now())
            config = AgentConfig.model_validate(merged.model_dump())
            await asyncio.to_thread(self.store.write_config, config)
            agent.config = config
            if schedule != agent.schedule:
                agent.schedule = schedule
                if agent.state.status == "active":
                    self._reschedule(agent, self.clock.now())
                    await self._save_state(agent)
        self._publish_update(agent)
        return self.detail(agent_id)

    async def pause(self, agent_id: str) -> dict[str, Any]:
        agent = self._get(agent_id)
        agent.state.status = "paused"
        agent.state.nextRunAt = None
        self._timer.set(agent_id, None)
        for run in [r for r in self._queue if r.agent_id == agent_id and r.trigger == "schedule"]:
            self._queue.remove(run)
            self._skipped(agent, run.scheduled_at, "paused")
        await self._save_state(agent)
        self._publish_update(agent)
        return self.detail(agent_id)

    async def resume(self, agent_id: str) -> dict[str, Any]:
        agent = self._get(agent_id)
        agent.state.status = "active"
        agent.state.consecutiveFailures = 0
        self._reschedule(agent, self.clock.now())
        await self._save_state(agent)
        self._publish_update(agent)
        return self.detail(agent_id)

    async def trigger(self, agent_id: str) -> dict[str, Any]:
        """Queue a manual run; it is persisted before this returns and is never dropped."""
        self._refuse_if_stopping()
        agent = self._get(agent_id)
        if self._queued_count(agent_id) >= MAX_QUEUED_PER_AGENT:
            raise RunQueueFull(
                f"this agent already has {MAX_QUEUED_PER_AGENT} runs waiting; "
                "retry when one has started"
            )
        run = QueuedRun(agent_id, self._new_execution_id(), "manual")
        agent.state.pendingRuns.append(run.execution_id)
        await self._save_state(agent)
        self._queue.append(run)
        self._dispatch()
        running = self._running.get(agent_id)
        started = running is not None and running.run is run
        position = 0 if started else self._queue.index(run) + 1
        return {
            "executionId": run.execution_id,
            "status": "started" if started else "queued",
            "position": position,
            "running": self.is_running(agent_id),
        }

    async def delete(self, agent_id: str) -> None:
        async with self._mutations:
            agent = self._get(agent_id)
            agent.deleted = True
            self._timer.set(agent_id, None)
            self._queue = [run for run in self._queue if run.agent_id != agent_id]
            running = self._running.get(agent_id)
            if running is not None:
                running.task.cancel()
                await asyncio.gather(running.task, return_exceptions=True)
            async with agent.save_lock:  # no state write may recreate the folder
                del self._agents[agent_id]
                await asyncio.to_thread(self.store.delete, agent_id, list(self._agents))
        self._notify("agent:deleted", {"agentId": agent_id})
        log.info(
            "proactive agent deleted", extra={"action": "proactive.deleted", "agentId": agent_id}
        )

    # -- validation helpers ---------------------------------------------------------------

    def resolve_cwd(self, raw: str | None) -> str:
        """An existing directory inside the workspace, resolved (symlinks included)."""
        workspace = self.workspace.resolve()
        if raw is None:
            return str(workspace)
        path = Path(raw)
        if not path.is_absolute():
            path = workspace / path
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise InvalidAgentInput(f"cwd {raw!r} does not exist", "cwd") from exc
        if resolved != workspace and workspace not in resolved.parents:
            raise InvalidAgentInput(
                f"cwd {raw!r} is outside the workspace {str(workspace)!r} "
                "(settings: proactive.workspace)",
                "cwd",
            )
        if not resolved.is_dir():
            raise InvalidAgentInput(f"cwd {raw!r} is not a directory", "cwd")
        return str(resolved)

    def _fresh_id(self) -> str:
        while True:
            agent_id = self._new_agent_id()
            if agent_id not in self._agents and not self.store.agent_dir(agent_id).exists():
                return agent_id  # (a folder left by a crash is never reused)

    def _refuse_if_stopping(self) -> None:
        if self._stopping:
            raise ServiceStopping("the engine is shutting down")

    # -- schedule ---------------------------------------------------------------------

    def _reschedule(self, agent: _Agent, after: datetime) -> None:
        if agent.state.status != "active":
            agent.state.nextRunAt = None
            self._timer.set(agent.id, None)
            return
        next_at = agent.schedule.next_after(after)
        agent.state.nextRunAt = to_ms(next_at) if next_at is not None else None
        self._timer.set(agent.id, next_at)

    def _count_missed(self, agent: _Agent, first: datetime, now: datetime) -> int:
        return max(1, len(agent.schedule.between(first - timedelta(milliseconds=1), now, 100_000)))

    def _on_due(self, agent_id: str, scheduled_at: datetime) -> None:
        agent = self._agents.get(agent_id)
        if agent is None or agent.deleted or agent.state.status != "active" or self._stopping:
            return
        now = self.clock.now()
        self._reschedule(agent, max(now, scheduled_at))
        late_s = (now - scheduled_at).total_seconds()
        if late_s > MISFIRE_GRACE_S:
            self._misfire(
                agent, to_ms(scheduled_at), self._count_missed(agent, scheduled_at, now), now
            )
        elif self.is_running(agent_id) or self._queued_count(agent_id):
            self._skipped(agent, scheduled_at, "running" if self.is_running(agent_id) else "queued")
        else:
            self._queue.append(
                QueuedRun(agent_id, self._new_execution_id(), "schedule", scheduled_at)
            )
        self._spawn(self._save_state(agent))
        self._publish_update(agent)
        self._dispatch()

    def _misfire(self, agent: _Agent, scheduled_ms: int, missed: int, now: datetime) -> None:
        agent.state.missedRuns += missed
        agent.state.lastMissedAt = to_ms(now)
        self._spawn(self._save_state(agent))
        missed_by = (to_ms(now) - scheduled_ms) / 60_000
        log.warning(
            "proactive agent %s missed %d scheduled run(s); skipped, not caught up",
            agent.id, missed,
            extra={"action": "proactive.misfire", "agentId": agent.id},
        )  # fmt: skip
        self._notify(
            "agent:misfire",
            {
                "agentId": agent.id,
                "name": agent.config.name,
                "scheduledAt": scheduled_ms,
                "missedRuns": missed,
                "missedByMinutes": round(missed_by, 2),
                "nextRunAt": agent.state.nextRunAt,
            },
        )

    def _skipped(self, agent: _Agent, scheduled_at: datetime | None, reason: str) -> None:
        log.info(
            "proactive agent %s: scheduled run skipped (%s)", agent.id, reason,
            extra={"action": "proactive.skipped", "agentId": agent.id, "reason": reason},
        )  # fmt: skip
        self._notify(
            "agent:skipped",
            {
                "agentId": agent.id,
                "name": agent.config.name,
                "scheduledAt": to_ms(scheduled_at) if scheduled_at else None,
                "reason": reason,
            },
        )

    # -- execution ----------------------------------------------------------------------

    def _dispatch(self) -> None:
        if self._stopping or not self._started:
            return
        while len(self._running) < self.limits.max_concurrent:
            run = next((r for r in self._queue if r.agent_id not in self._running), None)
            if run is None:
                return
            self._queue.remove(run)
            pending = self._agents[run.agent_id].state.pendingRuns
            if run.execution_id in pending:
                pending.remove(run.execution_id)  # saved by the run before it starts
            task = asyncio.create_task(self._execute(run), name=f"proactive-run-{run.agent_id}")
            self._running[run.agent_id] = _Running(run, task)

    async def _execute(self, run: QueuedRun) -> None:
        agent = self._agents[run.agent_id]
        try:
            await self._execute_in_slot(agent, run)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "a proactive execution failed unexpectedly",
                extra={"action": "proactive.execution_error", "agentId": agent.id},
            )
        finally:
            if self._running.pop(agent.id, None) is not None:
                self._publish_update(agent)  # it ended before its result was recorded
            self._dispatch()

    async def _execute_in_slot(self, agent: _Agent, run: QueuedRun) -> None:
        await self._save_state(agent)  # nextRunAt and the queue, durable before the run starts
        started = self.clock.now()
        started_mono = time.monotonic()
        files = await asyncio.to_thread(self.store.execution_files, agent.id, to_ms(started))
        agent.live.reset()
        output = ExecutionOutput(
            files,
            self.redact,
            agent.live,
            lambda text: self._notify("agent:output", {"agentId": agent.id, "text": text}),
        )
        await output.open()
        self._notify(
            "agent:execution:start",
            {"agentId": agent.id, "executionId": run.execution_id, "trigger": run.trigger},
        )
        self._publish_update(agent)
        interrupted = False
        try:
            outcome = await self._run(agent, run, output)
        except asyncio.CancelledError:
            interrupted = True
            outcome = RunOutcome("failure", None, INTERRUPTED)
        finally:
            await output.close()
        duration_ms = int((time.monotonic() - started_mono) * 1000)
        result = ExecutionResult(
            executionId=run.execution_id,
            agentId=agent.id,
            startedAt=files.started_at_ms,
            completedAt=files.started_at_ms + duration_ms,
            durationMs=duration_ms,
            result=outcome.result,
            exitCode=outcome.exit_code,
            outputLines=output.lines,
            error=self.redact(outcome.error) if outcome.error else None,
            trigger=run.trigger,
        )
        await self._finish(agent, files, result, interrupted)
        if interrupted:
            raise asyncio.CancelledError

    async def _run(self, agent: _Agent, run: QueuedRun, output: ExecutionOutput) -> RunOutcome:
        config = agent.config
        runner = self.runners.get(config.runner)
        if runner is None:
            return RunOutcome("failure", None, f"the runner {config.runner!r} is not available")
        try:
            cwd = await asyncio.to_thread(self.resolve_cwd, config.cwd)
        except ProactiveError as exc:
            return RunOutcome("failure", None, exc.message)
        request = RunRequest(
            agent_id=config.id,
            execution_id=run.execution_id,
            objective=config.objective,
            cwd=Path(cwd),
            model=config.model,
            timeout_s=config.timeoutMs / 1000,
        )
        try:
            return await runner.run(request, output)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception(
                "proactive runner failed",
                extra={"action": "proactive.runner_error", "agentId": config.id},
            )
            return RunOutcome("failure", None, f"the runner failed: {type(exc).__name__}")

    async def _finish(
        self, agent: _Agent, files: ExecutionFiles, result: ExecutionResult, interrupted: bool
    ) -> None:
        if agent.deleted:
            return
        await asyncio.to_thread(self.store.write_result, files, result)
        await asyncio.to_thread(self.store.prune, agent.id)
        state = agent.state
        state.lastExecutionAt = result.completedAt
        state.lastResult = result.result
        state.totalExecutions += 1
        if result.result == "success":
            state.consecutiveFailures = 0
        elif not interrupted:  # a shutdown is not the agent's failure
            state.consecutiveFailures += 1
            if state.consecutiveFailures >= agent.config.maxRetries and state.status == "active":
                state.status = "error"
                self._reschedule(agent, self.clock.now())
                log.warning(
                    "proactive agent %s auto-paused after %d consecutive failures; "
                    "resume it once the cause is fixed",
                    agent.id, state.consecutiveFailures,
                    extra={"action": "proactive.auto_paused", "agentId": agent.id},
                )  # fmt: skip
        await self._save_state(agent)
        self._running.pop(agent.id, None)  # clients told "complete" see it no longer running
        self._notify(
            "agent:execution:complete",
            {
                "agentId": agent.id,
                "executionId": result.executionId,
                "result": result.result,
                "execution": result.to_wire(),
            },
        )
        self._publish_update(agent)

    # -- persistence and events ---------------------------------------------------------

    async def _save_state(self, agent: _Agent) -> None:
        async with agent.save_lock:
            if agent.deleted:
                return
            snapshot = agent.state.model_copy(deep=True)
            await asyncio.to_thread(self.store.write_state, agent.id, snapshot)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "saving proactive state failed: %s; it is retried on the next change",
                task.exception(),
                extra={"action": "proactive.save_failed"},
            )

    def _publish_update(self, agent: _Agent) -> None:
        if not agent.deleted:
            self._notify(
                "agent:update",
                summary(agent.config, agent.state, running=self.is_running(agent.id)),
            )

    def _notify(self, type: str, data: dict[str, Any]) -> None:
        self.broadcaster.publish(type, data)
        if self._on_event is not None and type != "agent:output":
            self._on_event(type, data)


def _parse_schedule(expression: str, timezone: str) -> CronSchedule:
    try:
        return CronSchedule.parse(expression, timezone)
    except ScheduleError as exc:
        blame = "timezone" if "time zone" in str(exc) else "schedule"
        raise InvalidAgentInput(str(exc), blame) from exc


def _check_objective(objective: str, runner: str) -> None:
    # The Claude CLI would read a leading dash as one of its own options.
    if runner == "claude" and objective.lstrip().startswith("-"):
        raise InvalidAgentInput(
            "objective must not start with '-' for the claude runner (it would be read as an "
            "option of the CLI)",
            "objective",
        )
