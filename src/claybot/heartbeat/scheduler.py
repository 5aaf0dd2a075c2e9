"""The heartbeat scheduler: one batch prompt, one agent turn, every interval.

Every heartbeat task whose gate passes goes into one prompt for the single
heartbeat agent, so a beat costs one inference call however many tasks there
are. ``lastRunAt`` is one global timestamp (seed 000) and each task still emits
``heartbeat.task.ran``. A beat due while the previous one is still running
waits for it (deferred, never dropped or doubled). A reply of only
``HEARTBEAT_OK`` means nothing needs attention and goes nowhere; anything else
is passed to the most recent user conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any, Protocol, TypedDict

from claybot.heartbeat.store import HeartbeatStore, HeartbeatTask, HeartbeatTaskFields
from claybot.kernel.clock import Clock, from_ms, to_ms
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.sandbox import SandboxRunner
from claybot.scheduling.due_timer import DueTimer
from claybot.scheduling.gate import GateGrant, GateRefused, GateResult, run_gate

log = logging.getLogger(__name__)

HEARTBEAT_OK = "HEARTBEAT_OK"
BEAT = "beat"  # the timer's one key: there is one next beat


class HeartbeatHost(Protocol):
    async def post_beat(self, message_id: str, text: str) -> tuple[str, str]:
        """Post to the heartbeat agent; (agent id, item id)."""
        ...

    async def wait_beat(self, agent_id: str, item_id: str) -> str | None:
        """Until the turn is done; its final text (None if unknown)."""
        ...

    async def forward_beat(self, message_id: str, text: str) -> None:
        """Pass a reply that needs attention to the most recent user conversation."""
        ...

    async def gate_grant(self, made_by: str | None, folder: str) -> GateGrant:
        """Where a gate runs and what it sees (see ``claybot.scheduling.gate``)."""
        ...


def batch_prompt(tasks: list[tuple[HeartbeatTask, str | None]], at: datetime) -> str:
    parts = [
        f"# Heartbeat run ({at.isoformat(timespec='minutes')})",
        "",
        f"Work through each task below. If nothing needs the user's attention, reply with "
        f"exactly {HEARTBEAT_OK}; otherwise reply with what the user should know.",
    ]
    for number, (task, gate_output) in enumerate(tasks, start=1):
        parts += ["", f"## {number}. {task.title}", f"id: {task.id}", "", task.prompt]
        if gate_output:
            parts += ["", "[Gate output]", gate_output]
    return "\n".join(parts)


class HeartbeatListing(TypedDict):
    """The tasks and the beat as the API lists them (``wire.heartbeat.HeartbeatTaskList``)."""

    tasks: list[HeartbeatTaskFields]
    problems: list[dict[str, str]]  # a task file's path and what is wrong with it
    nextRunAt: str
    intervalS: float


class HeartbeatScheduler:
    def __init__(
        self,
        store: HeartbeatStore,
        host: HeartbeatHost,
        events: EventBus,
        clock: Clock,
        gates: SandboxRunner,
        *,
        interval: timedelta,
    ) -> None:
        self.store = store
        self.host = host
        self.events = events
        self.clock = clock
        self.interval = interval
        self.last_run_at: datetime | None = None
        self._beat_lock = asyncio.Lock()
        self._timer = DueTimer(clock)
        self._loop: asyncio.Task[None] | None = None
        self._manual: set[asyncio.Task[Any]] = set()
        self._gates = gates

    async def start(self) -> None:
        state = await asyncio.to_thread(self.store.read_state)
        last = state.get("lastRunAt")
        self.last_run_at = from_ms(int(last)) if isinstance(last, int) else None
        running = state.get("running")
        self._loop = asyncio.create_task(self._run(running), name="heartbeat")

    async def stop(self) -> None:
        tasks = [task for task in (self._loop, *self._manual) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def next_beat(self) -> datetime:
        if self.last_run_at is None:
            return self.clock.now()
        return self.last_run_at + self.interval

    async def _run(self, running: Any) -> None:
        if isinstance(running, dict):  # a beat was under way when the engine stopped
            with contextlib.suppress(Exception):
                await self._finish_interrupted(running)
        self._timer.set(BEAT, self.next_beat())
        await self._timer.run(self._beat_due)

    async def _beat_due(self, now: datetime) -> None:
        for _, due in self._timer.take_due(now):
            try:
                await self.beat(due)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed", extra={"action": "heartbeat.failed"})
                self.last_run_at = due  # try again next interval, not in a tight loop
            self._timer.set(BEAT, self.next_beat())

    async def _finish_interrupted(self, running: dict[str, Any]) -> None:
        at = from_ms(int(running["at"]))
        message_id = str(running["messageId"])
        ids = [str(task_id) for task_id in running.get("tasks", [])]
        async with self._beat_lock:
            # Posting again under the same id is dropped by the inbox if it arrived before.
            agent_id, item_id = await self.host.post_beat(message_id, str(running["prompt"]))
            reply = await self.host.wait_beat(agent_id, item_id)
            await self._record(at, message_id, ids, reply, manual=bool(running.get("manual")))

    async def unknown(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` that name no task."""
        tasks, _ = await asyncio.to_thread(self.store.scan)
        known = {task.id for task in tasks}
        return [task_id for task_id in ids if task_id not in known]

    def run_now(self, ids: list[str] | None = None) -> None:
        """``heartbeat_run``: a beat now (after the one in progress, if any)."""
        task = asyncio.create_task(self.beat(self.clock.now(), ids=ids, manual=True))
        self._manual.add(task)
        task.add_done_callback(self._manual.discard)

    async def beat(
        self, at: datetime, *, ids: list[str] | None = None, manual: bool = False
    ) -> list[str]:
        """One batch; returns the ids of the tasks it included."""
        if self._beat_lock.locked():
            self.events.emit(EventType.HEARTBEAT_DEFERRED, {"scheduledAt": at.isoformat()})
        async with self._beat_lock:
            tasks, _ = await asyncio.to_thread(self.store.scan)
            if ids is not None:
                tasks = [task for task in tasks if task.id in ids]
            included: list[tuple[HeartbeatTask, str | None]] = []
            for task in tasks:
                if task.gate is None:
                    included.append((task, None))
                    continue
                gate = await self._run_gate(task)
                if gate.passed:
                    included.append((task, gate.output or None))
                else:
                    self.events.emit(
                        EventType.HEARTBEAT_TASK_SKIPPED,
                        {"taskId": task.id, "reason": "gate", "detail": gate.reason},
                    )
            at_ms = to_ms(at)
            message_id = f"heartbeat:{'manual:' if manual else ''}{at_ms}"
            task_ids = [task.id for task, _ in included]
            if not included:
                await self._record(at, message_id, [], None, manual=manual)
                return []
            prompt = batch_prompt(included, at)
            running = {
                "at": at_ms,
                "messageId": message_id,
                "tasks": task_ids,
                "prompt": prompt,
                "manual": manual,
            }
            await asyncio.to_thread(self.store.write_state, {**self._state(), "running": running})
            agent_id, item_id = await self.host.post_beat(message_id, prompt)
            reply = await self.host.wait_beat(agent_id, item_id)
            await self._record(at, message_id, task_ids, reply, manual=manual)
            return task_ids

    async def _run_gate(self, task: HeartbeatTask) -> GateResult:
        assert task.gate is not None
        try:
            grant = await self.host.gate_grant(task.created_by, str(self.store.gate_folder))
        except GateRefused as exc:
            return GateResult(False, "", None, f"the gate may not run: {exc}")
        return await run_gate(self._gates, task.gate.command, grant, task.gate.timeoutMs / 1000)

    def _state(self) -> dict[str, Any]:
        return {"lastRunAt": to_ms(self.last_run_at) if self.last_run_at else None}

    async def _record(
        self,
        at: datetime,
        message_id: str,
        task_ids: list[str],
        reply: str | None,
        *,
        manual: bool,
    ) -> None:
        if self.last_run_at is None or at > self.last_run_at:
            self.last_run_at = at
        await asyncio.to_thread(self.store.write_state, self._state())
        if manual:  # the next scheduled beat counts from this one
            self._timer.set(BEAT, self.next_beat())
        for task_id in task_ids:
            self.events.emit(
                EventType.HEARTBEAT_TASK_RAN, {"taskId": task_id, "lastRunAt": at.isoformat()}
            )
        if reply is not None and reply.strip() and reply.strip() != HEARTBEAT_OK:
            await self.host.forward_beat(message_id, reply.strip())

    async def listing(self) -> HeartbeatListing:
        tasks, problems = await asyncio.to_thread(self.store.scan)
        last = self.last_run_at.isoformat() if self.last_run_at else None
        return {
            "tasks": [task.to_dict(last) for task in tasks],
            "problems": [{"path": p.path, "reason": p.reason} for p in problems],
            "nextRunAt": self.next_beat().isoformat(),
            "intervalS": self.interval.total_seconds(),
        }
