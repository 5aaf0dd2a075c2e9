"""When agents run: each agent's cron expression in its own time zone, on one timer.

DST-correct through ``CronSchedule``. ``nextRunAt`` is saved before a run starts,
so a crash never runs one scheduled time twice; scheduled times missed while the
engine was down are skipped with ``agent:misfire``, not caught up. A tick on an
agent that is running (or already queued) is skipped with ``agent:skipped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from claybot.kernel.clock import Clock, to_ms
from claybot.proactive.agent import LoadedAgent
from claybot.proactive.notifier import Notifier
from claybot.proactive.queue import QueuedRun, RunQueue
from claybot.proactive.state_writer import StateWriter
from claybot.scheduling.due_timer import DueTimer

log = logging.getLogger(__name__)

# A tick this late (the loop was blocked, the machine slept) counts as missed, not run.
MISFIRE_GRACE_S = 60.0


class Scheduler:
    def __init__(
        self,
        agents: Mapping[str, LoadedAgent],
        runs: RunQueue,
        *,
        clock: Clock,
        states: StateWriter,
        notifier: Notifier,
        new_execution_id: Callable[[], str],
    ) -> None:
        self._agents = agents
        self._runs = runs
        self._clock = clock
        self._states = states
        self._notifier = notifier
        self._new_execution_id = new_execution_id
        self._timer = DueTimer(clock)
        self._timer_task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        if self._timer_task is None:
            self._timer_task = asyncio.create_task(
                self._timer.run(self._take_due), name="proactive-timer"
            )

    async def stop(self) -> None:
        self._stopping = True  # before the first await: no tick is taken from here on
        task, self._timer_task = self._timer_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def reschedule(self, agent: LoadedAgent, after: datetime) -> None:
        if agent.state.status != "active":
            agent.state.nextRunAt = None
            self._timer.set(agent.id, None)
            return
        next_at = agent.schedule.next_after(after)
        agent.state.nextRunAt = to_ms(next_at) if next_at is not None else None
        self._timer.set(agent.id, next_at)

    def unschedule(self, agent_id: str) -> None:
        self._timer.set(agent_id, None)

    def count_missed(self, agent: LoadedAgent, first: datetime, now: datetime) -> int:
        return max(1, len(agent.schedule.between(first - timedelta(milliseconds=1), now, 100_000)))

    async def _take_due(self, now: datetime) -> None:
        for agent_id, scheduled_at in self._timer.take_due(now):
            try:
                self._on_due(agent_id, scheduled_at)
            except Exception:
                log.exception(
                    "a due callback failed",
                    extra={"action": "proactive.timer_error", "key": agent_id},
                )

    def _on_due(self, agent_id: str, scheduled_at: datetime) -> None:
        agent = self._agents.get(agent_id)
        if agent is None or agent.deleted or agent.state.status != "active" or self._stopping:
            return
        now = self._clock.now()
        self.reschedule(agent, max(now, scheduled_at))
        late_s = (now - scheduled_at).total_seconds()
        if late_s > MISFIRE_GRACE_S:
            self.misfire(
                agent, to_ms(scheduled_at), self.count_missed(agent, scheduled_at, now), now
            )
        elif self._runs.is_running(agent_id) or self._runs.queued_count(agent_id):
            reason = "running" if self._runs.is_running(agent_id) else "queued"
            self.skipped(agent, scheduled_at, reason)
        else:
            self._runs.add(QueuedRun(agent_id, self._new_execution_id(), "schedule", scheduled_at))
        self._states.save_soon(agent)
        self._notifier.agent_update(agent, running=self._runs.is_running(agent_id))
        self._runs.dispatch()

    def misfire(self, agent: LoadedAgent, scheduled_ms: int, missed: int, now: datetime) -> None:
        agent.state.missedRuns += missed
        agent.state.lastMissedAt = to_ms(now)
        self._states.save_soon(agent)
        missed_by = (to_ms(now) - scheduled_ms) / 60_000
        log.warning(
            "proactive agent %s missed %d scheduled run(s); skipped, not caught up",
            agent.id, missed,
            extra={"action": "proactive.misfire", "agentId": agent.id},
        )  # fmt: skip
        self._notifier.notify(
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

    def skipped(self, agent: LoadedAgent, scheduled_at: datetime | None, reason: str) -> None:
        log.info(
            "proactive agent %s: scheduled run skipped (%s)", agent.id, reason,
            extra={"action": "proactive.skipped", "agentId": agent.id, "reason": reason},
        )  # fmt: skip
        self._notifier.notify(
            "agent:skipped",
            {
                "agentId": agent.id,
                "name": agent.config.name,
                "scheduledAt": to_ms(scheduled_at) if scheduled_at else None,
                "reason": reason,
            },
        )
