"""The run queue: which runs wait, which run now, and one execution from start to result.

FIFO, at most ``max_concurrent`` executions at once across all agents, one at a
time per agent. An agent is auto-paused (``error``) after ``maxRetries``
consecutive failures; a run ended by a shutdown is not the agent's failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from claybot.kernel.clock import Clock, to_ms
from claybot.proactive.agent import LoadedAgent
from claybot.proactive.errors import ProactiveError
from claybot.proactive.models import ExecutionResult, Trigger
from claybot.proactive.notifier import Notifier
from claybot.proactive.output import ExecutionOutput
from claybot.proactive.runner import Runner, RunOutcome, RunRequest
from claybot.proactive.state_writer import StateWriter
from claybot.proactive.store import ExecutionFiles, ProactiveStore

log = logging.getLogger(__name__)

MAX_QUEUED_PER_AGENT = 10
INTERRUPTED = "interrupted: the engine stopped during this run"


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


class RunQueue:
    def __init__(
        self,
        agents: Mapping[str, LoadedAgent],
        store: ProactiveStore,
        runners: Mapping[str, Runner],
        *,
        max_concurrent: int,
        clock: Clock,
        redact: Callable[[str], str],
        resolve_cwd: Callable[[str | None], str],
        states: StateWriter,
        notifier: Notifier,
        reschedule: Callable[[LoadedAgent, datetime], None],
    ) -> None:
        self._agents = agents
        self._store = store
        self._runners = runners
        self._max_concurrent = max_concurrent
        self._clock = clock
        self._redact = redact
        self._resolve_cwd = resolve_cwd
        self._states = states
        self._notifier = notifier
        self._reschedule = reschedule
        self._waiting: list[QueuedRun] = []
        self._running: dict[str, _Running] = {}
        self._open = False

    # -- reading ------------------------------------------------------------------

    def is_running(self, agent_id: str) -> bool:
        return agent_id in self._running

    def running_count(self) -> int:
        return len(self._running)

    def queued_count(self, agent_id: str) -> int:
        return sum(1 for run in self._waiting if run.agent_id == agent_id)

    def waiting(self, agent_id: str) -> list[QueuedRun]:
        return [run for run in self._waiting if run.agent_id == agent_id]

    def has_started(self, run: QueuedRun) -> bool:
        running = self._running.get(run.agent_id)
        return running is not None and running.run is run

    def position(self, run: QueuedRun) -> int:
        """0 once it runs, else its place in the line (1 is next)."""
        return 0 if self.has_started(run) else self._waiting.index(run) + 1

    # -- changes ----------------------------------------------------------------------

    def add(self, run: QueuedRun) -> None:
        """Put a run in line; it starts on the next ``dispatch``."""
        self._waiting.append(run)

    def remove(self, run: QueuedRun) -> None:
        self._waiting.remove(run)

    def drop_agent(self, agent_id: str) -> None:
        self._waiting = [run for run in self._waiting if run.agent_id != agent_id]

    async def cancel(self, agent_id: str) -> None:
        """End the agent's running execution, if any, and wait until it has ended."""
        running = self._running.get(agent_id)
        if running is not None:
            running.task.cancel()
            await asyncio.gather(running.task, return_exceptions=True)

    def open(self) -> None:
        self._open = True
        self.dispatch()

    def close(self) -> None:
        """No run starts from now on."""
        self._open = False

    async def cancel_all(self) -> None:
        self._waiting.clear()  # manual runs stay in state.pendingRuns for the next start
        running = [entry.task for entry in self._running.values()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    # -- execution ----------------------------------------------------------------------

    def dispatch(self) -> None:
        if not self._open:
            return
        while len(self._running) < self._max_concurrent:
            run = next((r for r in self._waiting if r.agent_id not in self._running), None)
            if run is None:
                return
            self._waiting.remove(run)
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
            self.dispatch()

    async def _execute_in_slot(self, agent: LoadedAgent, run: QueuedRun) -> None:
        await self._states.save(agent)  # nextRunAt and the queue, durable before the run starts
        started = self._clock.now()
        started_mono = time.monotonic()
        files = await asyncio.to_thread(self._store.execution_files, agent.id, to_ms(started))
        agent.live.reset()
        output = ExecutionOutput(
            files,
            self._redact,
            agent.live,
            lambda text: self._notifier.notify("agent:output", {"agentId": agent.id, "text": text}),
        )
        await output.open()
        self._notifier.notify(
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
            error=self._redact(outcome.error) if outcome.error else None,
            trigger=run.trigger,
        )
        await self._finish(agent, files, result, interrupted)
        if interrupted:
            raise asyncio.CancelledError

    async def _run(self, agent: LoadedAgent, run: QueuedRun, output: ExecutionOutput) -> RunOutcome:
        config = agent.config
        runner = self._runners.get(config.runner)
        if runner is None:
            return RunOutcome("failure", None, f"the runner {config.runner!r} is not available")
        try:
            cwd = await asyncio.to_thread(self._resolve_cwd, config.cwd)
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
        self, agent: LoadedAgent, files: ExecutionFiles, result: ExecutionResult, interrupted: bool
    ) -> None:
        if agent.deleted:
            return
        await asyncio.to_thread(self._store.write_result, files, result)
        await asyncio.to_thread(self._store.prune, agent.id)
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
                self._reschedule(agent, self._clock.now())
                log.warning(
                    "proactive agent %s auto-paused after %d consecutive failures; "
                    "resume it once the cause is fixed",
                    agent.id, state.consecutiveFailures,
                    extra={"action": "proactive.auto_paused", "agentId": agent.id},
                )  # fmt: skip
        await self._states.save(agent)
        self._running.pop(agent.id, None)  # clients told "complete" see it no longer running
        self._notifier.notify(
            "agent:execution:complete",
            {
                "agentId": agent.id,
                "executionId": result.executionId,
                "result": result.result,
                "execution": result.to_wire(),
            },
        )
        self._publish_update(agent)

    def _publish_update(self, agent: LoadedAgent) -> None:
        self._notifier.agent_update(agent, running=self.is_running(agent.id))
