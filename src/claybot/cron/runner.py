"""Cron runs in flight: each is gated, posted to its agent, waited for, and recorded.

The scheduler has already recorded a run as started in the ledger when it hands
it here; this module takes it to its end: ``finished`` in the ledger, the
``cron.task.ran`` event and the task's STATE.json. A run cancelled by shutdown
stays started, and the next boot posts it again under the same message id. A task
counts as busy (for ``overlap: skip``) from its launch until its run is finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from claybot.cron.ledger import RunLedger, Status
from claybot.cron.run import CronHost, RunKey, run_prompt
from claybot.cron.store import CronStore, CronTask
from claybot.cron.task import Gate
from claybot.kernel.clock import Clock, from_ms, to_ms
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.sandbox import SandboxRunner
from claybot.scheduling.gate import GateRefused, GateResult, run_gate

log = logging.getLogger(__name__)

Posted = tuple[str, str] | Exception  # (agent id, item id), or why it was not posted
# Lateness hook (the benchmark): ("recorded" | "posted", run, seconds late).
LatenessHook = Callable[[str, RunKey, float], None]


class CronRunner:
    def __init__(
        self,
        store: CronStore,
        ledger: RunLedger,
        host: CronHost,
        events: EventBus,
        clock: Clock,
        gates: SandboxRunner,
        *,
        remove: Callable[[str], Awaitable[object]],
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._host = host
        self._events = events
        self._clock = clock
        self._gates = gates
        self._remove = remove  # a ``deleteAfterRun`` task, once it ran
        self._inflight: dict[RunKey, asyncio.Task[None]] = {}
        self._running: dict[str, int] = {}  # task id -> runs in flight
        self.on_lateness: LatenessHook | None = None

    def busy(self, task_id: str) -> bool:
        return bool(self._running.get(task_id))

    async def stop(self) -> None:
        running = list(self._inflight.values())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        self._inflight.clear()

    async def post_together(self, runs: list[tuple[CronTask, RunKey]]) -> dict[RunKey, Posted]:
        """Post runs without a gate in one inbox batch (one sync). A run missing from the
        answer (the batch failed as a whole) is then posted on its own by ``launch``."""
        prompts = [
            (task, key.message_id, run_prompt(task, from_ms(key.at_ms), None)) for task, key in runs
        ]
        try:
            results = await self._host.post_runs(prompts)
        except asyncio.CancelledError:
            raise
        except Exception:  # each run then posts on its own and reports its own error
            log.exception("posting cron runs together failed", extra={"action": "cron.batch"})
            return {}
        delivered = {key: result for (_, key), result in zip(runs, results, strict=True)}
        for task, key in runs:
            result = delivered[key]
            if not isinstance(result, Exception):
                self.started(task, key, result[0], resumed=False)
        return delivered

    def launch(
        self, task: CronTask, key: RunKey, *, resumed: bool, delivered: Posted | None = None
    ) -> asyncio.Future[None]:
        """Start a run; the returned future resolves once its prompt is posted (or it failed).

        ``delivered`` is the outcome of posting it already, with other runs of the moment.
        """
        posted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if key in self._inflight:
            posted.set_result(None)
            return posted
        runner = asyncio.create_task(
            self._execute(task, key, resumed, posted, delivered), name=key.message_id
        )
        self._inflight[key] = runner
        self._running[key.task_id] = self._running.get(key.task_id, 0) + 1

        def done(_: asyncio.Task[None]) -> None:
            self._release(key)
            if not posted.done():
                posted.set_result(None)

        runner.add_done_callback(done)
        return posted

    def _release(self, key: RunKey) -> None:
        """The run no longer counts as busy (for ``overlap``); safe to call twice."""
        if self._inflight.pop(key, None) is None:
            return
        left = self._running.get(key.task_id, 1) - 1
        if left:
            self._running[key.task_id] = left
        else:
            self._running.pop(key.task_id, None)

    async def _execute(
        self,
        task: CronTask,
        key: RunKey,
        resumed: bool,
        posted: asyncio.Future[None],
        delivered: Posted | None,
    ) -> None:
        at = from_ms(key.at_ms)
        try:
            if isinstance(delivered, Exception):
                raise delivered
            if delivered is not None:  # posted with the others of its moment, reported there
                agent_id, item_id = delivered
                posted.set_result(None)
                succeeded = await self._host.wait_run(agent_id, item_id)
                await self._finish(task, key, "ran" if succeeded else "failed", agent_id, None)
                return
            gate_output: str | None = None
            if task.spec.gate is not None:
                gate = await self._gate(task, task.spec.gate)
                if not gate.passed:
                    await self._ledger.finished(
                        task.id, key.at_ms, "skipped", to_ms(self._clock.now())
                    )
                    self._events.emit(EventType.CRON_TASK_SKIPPED,
                        {"taskId": task.id, "scheduledAt": [at.isoformat()], "reason": "gate",
                         "detail": gate.reason, "output": gate.output[-2000:]},
                    )  # fmt: skip
                    return
                gate_output = gate.output or None
            agent_id, item_id = await self._host.post_run(
                task, key.message_id, run_prompt(task, at, gate_output)
            )
            posted.set_result(None)
            self.started(task, key, agent_id, resumed)
            succeeded = await self._host.wait_run(agent_id, item_id)
        except asyncio.CancelledError:
            raise  # shutdown: the run stays started; the next boot finishes it
        except Exception as exc:
            log.exception("cron run failed", extra={"action": "cron.run_failed", "taskId": task.id})
            await self._finish(task, key, "failed", None, str(exc))
            return
        await self._finish(task, key, "ran" if succeeded else "failed", agent_id, None)

    async def _gate(self, task: CronTask, gate: Gate) -> GateResult:
        try:
            grant = await self._host.gate_grant(task.spec.createdBy, task.files_path)
        except GateRefused as exc:
            return GateResult(False, "", None, f"the gate may not run: {exc}")
        return await run_gate(self._gates, gate.command, grant, gate.timeoutMs / 1000)

    def started(self, task: CronTask, key: RunKey, agent_id: str, resumed: bool) -> None:
        """The run's prompt is durably in its agent's inbox."""
        at = from_ms(key.at_ms)
        lateness = (self._clock.now() - at).total_seconds()
        if self.on_lateness is not None:
            self.on_lateness("posted", key, lateness)
        if not resumed:
            self._events.emit(
                EventType.CRON_TASK_STARTED,
                {
                    "taskId": task.id,
                    "scheduledAt": at.isoformat(),
                    "agentId": agent_id,
                    "latenessMs": round(lateness * 1000, 3),
                },
            )

    async def _finish(
        self, task: CronTask, key: RunKey, status: Status, agent_id: str | None, error: str | None
    ) -> None:
        now = self._clock.now()
        await self._ledger.finished(task.id, key.at_ms, status, to_ms(now))
        self._release(key)  # finished: the next instant is not an overlap
        payload: dict[str, Any] = {
            "taskId": task.id,
            "scheduledAt": from_ms(key.at_ms).isoformat(),
            "status": status,
            "agentId": agent_id,
        }
        if error:
            payload["error"] = error
        self._events.emit(EventType.CRON_TASK_RAN, payload)
        state = {
            "lastRunAt": now.isoformat(),
            "lastScheduledAt": from_ms(key.at_ms).isoformat(),
            "lastStatus": status,
            "agentId": agent_id,
        }
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self._store.write_state, task, state)
        if status == "ran" and task.spec.deleteAfterRun:
            await self._remove(task.id)
