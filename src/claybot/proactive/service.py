"""The proactive agents service (seed 004): the facade the routes, CLI and engine use.

It owns the agents' lifecycle and files; ``scheduler`` decides when they run and
``queue`` runs them.

- Lifecycle: ``active`` (scheduled), ``paused`` (not scheduled; a manual run
  still runs, and the agent stays paused), ``error`` (auto-paused after
  ``maxRetries`` consecutive failures). Resume makes it active with its failures
  reset; delete stops it, ends a running execution and removes its files.
- A manual trigger is always queued (never skipped like a scheduled tick),
  persisted before it is acknowledged, and survives a restart.

It is longer than most modules because it is the one facade of seed 004: each public
operation is a few lines that check the agent's state and hand off to the store,
scheduler or queue.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from claybot.config.settings import ProactiveSettings
from claybot.kernel.clock import Clock, SystemClock, from_ms, to_ms
from claybot.proactive.agent import LoadedAgent
from claybot.proactive.broadcast import Broadcaster
from claybot.proactive.errors import (
    AgentLimitReached,
    AgentNotFound,
    InvalidAgentInput,
    NothingToShow,
    RunQueueFull,
    ServiceStopping,
)
from claybot.proactive.inputs import CreateAgentInput, UpdateAgentInput
from claybot.proactive.models import (
    AgentConfig,
    AgentDetail,
    AgentState,
    AgentSummary,
    ExecutionRecord,
    RunQueued,
    detail,
    summary,
)
from claybot.proactive.notifier import EventHook, Notifier
from claybot.proactive.queue import MAX_QUEUED_PER_AGENT, QueuedRun, RunQueue
from claybot.proactive.redact import Redactor
from claybot.proactive.runner import Runner
from claybot.proactive.scheduler import Scheduler
from claybot.proactive.state_writer import StateWriter
from claybot.proactive.store import ProactiveStore, execution_stamp
from claybot.scheduling.schedule import CronSchedule, ScheduleError

log = logging.getLogger(__name__)

MAX_FOLDERS_LISTED = 1000  # a folder picker's page; a workspace with more is cut short


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
        self._new_agent_id = new_agent_id
        self._new_execution_id = new_execution_id
        self._agents: dict[str, LoadedAgent] = {}
        self._notifier = Notifier(self.broadcaster, on_event)
        self._states = StateWriter(store)
        # The queue takes an auto-paused agent off the schedule and the scheduler
        # queues due runs: the queue reaches the scheduler through this callback.
        self._runs = RunQueue(
            self._agents,
            store,
            self.runners,
            max_concurrent=self.limits.max_concurrent,
            clock=self.clock,
            redact=self.redact,
            resolve_cwd=self.resolve_cwd,
            states=self._states,
            notifier=self._notifier,
            reschedule=lambda agent, after: self._schedule.reschedule(agent, after),
        )
        self._schedule = Scheduler(
            self._agents,
            self._runs,
            clock=self.clock,
            states=self._states,
            notifier=self._notifier,
            new_execution_id=new_execution_id,
        )
        self._mutations = asyncio.Lock()
        self._stopping = False

    # -- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self._prepare_dirs)
        report = await asyncio.to_thread(self.store.load)
        now = self.clock.now()
        misfires: list[tuple[LoadedAgent, int, int]] = []
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
            agent = LoadedAgent(config, state, schedule)
            self._agents[config.id] = agent
            if state.status == "active":
                if state.nextRunAt is not None and state.nextRunAt < to_ms(now):
                    missed = self._schedule.count_missed(agent, from_ms(state.nextRunAt), now)
                    misfires.append((agent, state.nextRunAt, missed))
                self._schedule.reschedule(agent, now)
            else:
                state.nextRunAt = None
            for execution_id in state.pendingRuns:
                self._runs.add(QueuedRun(config.id, execution_id, "manual"))
        for interrupted in report.interrupted:
            self._notifier.notify("agent:execution:interrupted", interrupted.to_wire())
        await asyncio.gather(*(self._states.save(agent) for agent in self._agents.values()))
        for agent, scheduled_ms, missed in misfires:
            self._schedule.misfire(agent, scheduled_ms, missed, now)
        self._schedule.start()
        self._runs.open()
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
        self._runs.close()  # before the first await: a run that ends now starts no other
        await self._schedule.stop()
        await self._runs.cancel_all()
        await self._states.drain()
        await asyncio.gather(
            *(self._states.save(agent) for agent in self._agents.values()), return_exceptions=True
        )
        self.broadcaster.close()

    # -- reading ------------------------------------------------------------------

    def _get(self, agent_id: str) -> LoadedAgent:
        agent = self._agents.get(agent_id)
        if agent is None or agent.deleted:
            raise AgentNotFound(agent_id)
        return agent

    def is_running(self, agent_id: str) -> bool:
        return self._runs.is_running(agent_id)

    def summaries(self) -> list[AgentSummary]:
        return [
            summary(a.config, a.state, running=self.is_running(a.id))
            for a in sorted(self._agents.values(), key=lambda a: a.config.createdAt)
        ]

    def detail(self, agent_id: str) -> AgentDetail:
        agent = self._get(agent_id)
        return detail(
            agent.config,
            agent.state,
            running=self.is_running(agent_id),
            queued=self._runs.queued_count(agent_id),
        )

    def running_count(self) -> int:
        return self._runs.running_count()

    async def executions(self, agent_id: str, limit: int) -> list[ExecutionRecord]:
        self._get(agent_id)
        results = await asyncio.to_thread(self.store.results, agent_id, limit)
        return [result.to_wire() for result in results]

    async def log_path(
        self, agent_id: str, execution_id: str | None = None, started_at: int | None = None
    ) -> Path:
        """The ``.log`` of the newest execution, of the one with this id, or of the one
        that started at ``started_at`` (its ``startedAt``, as seed 004's client asks)."""
        self._get(agent_id)
        stamp: str | None = None
        if started_at is not None:
            stamp = execution_stamp(started_at)
            path = await asyncio.to_thread(self.store.log_path, agent_id, stamp)
            if path is None:
                raise NothingToShow(f"no execution of this agent started at {started_at}", "ts")
            return path
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

    def folders(self, relative: str) -> tuple[str, list[str]]:
        """The workspace folder at ``relative`` (resolved) and the names of the folders in
        it that lie inside the workspace too: where an agent's ``cwd`` may be. Hidden
        folders are left out, and no file is named."""
        where = Path(self.resolve_cwd(relative or "."))
        workspace = self.workspace.resolve()
        names: list[str] = []
        try:
            with os.scandir(where) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or not entry.is_dir():
                        continue
                    target = Path(entry.path).resolve()
                    if target == workspace or workspace in target.parents:
                        names.append(entry.name)
                    if len(names) >= MAX_FOLDERS_LISTED:
                        break
        except OSError as exc:  # not readable, or gone meanwhile
            raise InvalidAgentInput(
                f"{relative!r} cannot be listed: {exc.strerror}", "cwd"
            ) from exc
        return str(where), sorted(names)

    def live_output(self, agent_id: str) -> str:
        text = self._get(agent_id).live.text()
        if not text:
            raise NothingToShow("this agent has produced no output yet", "id")
        return text

    # -- changes ----------------------------------------------------------------------

    async def create(self, body: CreateAgentInput) -> AgentDetail:
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
            agent = LoadedAgent(config, AgentState(status="active"), schedule)
            self._schedule.reschedule(agent, self.clock.now())
            ids = [*self._agents, config.id]
            await asyncio.to_thread(self.store.create, config, agent.state, ids)
            self._agents[config.id] = agent
        self._publish_update(agent)
        log.info(
            "proactive agent created",
            extra={"action": "proactive.created", "agentId": config.id, "runner": config.runner},
        )
        return self.detail(config.id)

    async def update(self, agent_id: str, body: UpdateAgentInput) -> AgentDetail:
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
                    self._schedule.reschedule(agent, self.clock.now())
                    await self._states.save(agent)
        self._publish_update(agent)
        return self.detail(agent_id)

    async def pause(self, agent_id: str) -> AgentDetail:
        agent = self._get(agent_id)
        agent.state.status = "paused"
        agent.state.nextRunAt = None
        self._schedule.unschedule(agent_id)
        for run in [r for r in self._runs.waiting(agent_id) if r.trigger == "schedule"]:
            self._runs.remove(run)
            self._schedule.skipped(agent, run.scheduled_at, "paused")
        await self._states.save(agent)
        self._publish_update(agent)
        return self.detail(agent_id)

    async def resume(self, agent_id: str) -> AgentDetail:
        agent = self._get(agent_id)
        agent.state.status = "active"
        agent.state.consecutiveFailures = 0
        self._schedule.reschedule(agent, self.clock.now())
        await self._states.save(agent)
        self._publish_update(agent)
        return self.detail(agent_id)

    async def trigger(self, agent_id: str) -> RunQueued:
        """Queue a manual run; it is persisted before this returns and is never dropped."""
        self._refuse_if_stopping()
        agent = self._get(agent_id)
        if self._runs.queued_count(agent_id) >= MAX_QUEUED_PER_AGENT:
            raise RunQueueFull(
                f"this agent already has {MAX_QUEUED_PER_AGENT} runs waiting; "
                "retry when one has started"
            )
        run = QueuedRun(agent_id, self._new_execution_id(), "manual")
        agent.state.pendingRuns.append(run.execution_id)
        await self._states.save(agent)
        self._runs.add(run)
        self._runs.dispatch()
        return {
            "executionId": run.execution_id,
            "status": "started" if self._runs.has_started(run) else "queued",
            "position": self._runs.position(run),
            "running": self.is_running(agent_id),
        }

    async def delete(self, agent_id: str) -> None:
        async with self._mutations:
            agent = self._get(agent_id)
            agent.deleted = True
            self._schedule.unschedule(agent_id)
            self._runs.drop_agent(agent_id)
            await self._runs.cancel(agent_id)
            async with agent.save_lock:  # no state write may recreate the folder
                del self._agents[agent_id]
                await asyncio.to_thread(self.store.delete, agent_id, list(self._agents))
        self._notifier.notify("agent:deleted", {"agentId": agent_id})
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
        # Where it is comes before whether it is there: a folder outside the workspace
        # (seed 004's own example, /workspace/my-project) is refused by the setting
        # that would allow it, whether or not it exists on this machine.
        try:
            where = path.resolve()
        # ValueError: a NUL in the name, which no file system takes.
        except (OSError, RuntimeError, ValueError) as exc:
            raise InvalidAgentInput(f"cwd {raw!r} cannot be resolved: {exc}", "cwd") from exc
        if where != workspace and workspace not in where.parents:
            raise InvalidAgentInput(
                f"cwd {raw!r} is outside the workspace {str(workspace)!r}; a proactive "
                "agent works inside proactive.workspace (settings.json), so set it to a "
                "folder that holds this one",
                "cwd",
            )
        try:
            exists, is_dir = where.exists(), where.is_dir()
        except OSError as exc:  # a name too long for the file system, a folder not readable
            raise InvalidAgentInput(f"cwd {raw!r} cannot be used: {exc.strerror}", "cwd") from exc
        if not exists:
            raise InvalidAgentInput(f"cwd {raw!r} does not exist", "cwd")
        if not is_dir:
            raise InvalidAgentInput(f"cwd {raw!r} is not a directory", "cwd")
        return str(where)

    def _fresh_id(self) -> str:
        while True:
            agent_id = self._new_agent_id()
            if agent_id not in self._agents and not self.store.agent_dir(agent_id).exists():
                return agent_id  # (a folder left by a crash is never reused)

    def _refuse_if_stopping(self) -> None:
        if self._stopping:
            raise ServiceStopping("the engine is shutting down")

    def _publish_update(self, agent: LoadedAgent) -> None:
        self._notifier.agent_update(agent, running=self.is_running(agent.id))


def _parse_schedule(expression: str, timezone: str) -> CronSchedule:
    try:
        return CronSchedule.parse(expression, timezone)
    except ScheduleError as exc:
        raise InvalidAgentInput(exc.message, exc.field) from exc


def _check_objective(objective: str, runner: str) -> None:
    # The Claude CLI would read a leading dash as one of its own options.
    if runner == "claude" and objective.lstrip().startswith("-"):
        raise InvalidAgentInput(
            "objective must not start with '-' for the claude runner (it would be read as an "
            "option of the CLI)",
            "objective",
        )
