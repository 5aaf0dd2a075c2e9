"""The cron scheduler: fires each task at its scheduled instants, exactly once.

One timer for all tasks (``DueTimer``: each task's next instant and a single sleep
until the earliest), so 10,000 idle tasks cost nothing between runs. When an instant
comes, the run (task, instant) is recorded in the ledger *before* anything else
happens; the prompt then goes to the task's agent under the message id
``cron:<taskId>:<instant ms>``. A restart finds started-but-unfinished runs in
the ledger and posts them again under the same id (the inbox drops a repeat),
so a run never happens twice. Instants that passed while the engine was down
follow the task's ``misfire`` policy (``due.py``).

This module holds what changes the plan (each task's next instant) and the ledger
together: firing, and the reaction to tasks added, edited or removed. Beside it:
the task files (``store.py``), the ledger (``ledger.py``), the due-time math
(``due.py``), a run from posting to its end (``runner.py``), warming agents ahead
(``warm.py``) and noticing edited files (``watch.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from claybot.cron.due import decide, next_instants
from claybot.cron.ledger import (
    Run,
    RunLedger,
    SkippedRecord,
    StartedRecord,
    skipped_records,
    started_record,
)
from claybot.cron.run import CronHost, RunKey
from claybot.cron.runner import CronRunner, LatenessHook
from claybot.cron.store import TASK_FILE, CronStore, CronTask, CronTaskListing, TaskProblem
from claybot.cron.task import CronTaskNotFound, CronTaskSpec
from claybot.cron.warm import AgentWarmer
from claybot.cron.watch import TaskFolders, watch_task_files
from claybot.kernel.clock import Clock, from_ms, to_ms
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.sandbox import SandboxRunner
from claybot.scheduling.due_timer import DueTimer
from claybot.scheduling.schedule import CronSchedule

log = logging.getLogger(__name__)

MISFIRE_GRACE = timedelta(seconds=60)  # a run later than this was missed, not just late
POSTING_WAIT_S = 5.0  # at most this long before the next instants are planned anyway
LEDGER_RETRY_S = 1.0  # pause before trying again when the ledger cannot be written


class CronScheduler:
    def __init__(
        self,
        store: CronStore,
        ledger: RunLedger,
        host: CronHost,
        events: EventBus,
        clock: Clock,
        gates: SandboxRunner,
        *,
        watch: bool = True,
        misfire_grace: timedelta = MISFIRE_GRACE,
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.events = events
        self.clock = clock
        self.tasks: dict[str, CronTask] = {}
        self.problems: list[TaskProblem] = []
        self._watch = watch
        self._grace = misfire_grace
        # Each task's next instant. Cron instants are whole seconds, so the milliseconds
        # a run is keyed by come back exactly from the datetime kept here.
        self._timer = DueTimer(clock)
        self._warmer = AgentWarmer(host, clock, self._timer, self.tasks)
        self._runner = CronRunner(store, ledger, host, events, clock, gates, remove=self.remove)
        self._replanning: asyncio.Task[None] | None = None
        self._by_folder: dict[str, str] = {}  # task folder name -> task id
        self._folders = TaskFolders(store)
        self._loops: list[asyncio.Task[None]] = []
        self._reload_lock = asyncio.Lock()

    @property
    def on_lateness(self) -> LatenessHook | None:
        """The benchmark's hook: ("recorded" | "posted", run, seconds late)."""
        return self._runner.on_lateness

    @on_lateness.setter
    def on_lateness(self, hook: LatenessHook | None) -> None:
        self._runner.on_lateness = hook

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.store.ensure)
        await self.ledger.open()
        tasks, problems = await asyncio.to_thread(self.store.scan)
        self.problems = problems
        now = self.clock.now()
        first_seen = []
        for problem in problems:
            folder = Path(problem.path).parent
            version = self.store.version_of(folder)
            if version is not None:
                self._folders.note(folder.name, version)
        for task in tasks.values():
            self.tasks[task.id] = task
            self._by_folder[task.directory.name] = task.id
            self._folders.note(task.directory.name, task.version)
            if self.ledger.runs(task.id).last_at is None:
                first_seen.append(task.id)
        await self._mark_seen(first_seen, now)
        # Ten thousand next-instant computations take a second: off the event loop.
        tasks_now = list(self.tasks.values())
        planned = await asyncio.to_thread(lambda: next_instants(self._plans(tasks_now, now)))
        for task_id, due_ms in planned:
            self._schedule_at(task_id, due_ms)
        for problem in problems:
            self._report(problem)
        # Runs that started before a restart and never finished: post again, same id.
        for task_id, runs in list(self.ledger.tasks.items()):
            unfinished = self.tasks.get(task_id)
            for at_ms in sorted(runs.running):
                if unfinished is not None:
                    self._runner.launch(unfinished, RunKey(task_id, at_ms), resumed=True)
        self._loops = [
            asyncio.create_task(self._timer.run(self._on_due), name="cron-timer"),
            asyncio.create_task(self._warmer.run(), name="cron-warm-timer"),
        ]
        if self._watch:
            watching = watch_task_files(self.store.root, self.rescan)
            self._loops.append(asyncio.create_task(watching, name="cron-watch"))
        self.events.emit(
            EventType.CRON_STARTED, {"tasks": len(self.tasks), "problems": len(self.problems)}
        )

    async def stop(self) -> None:
        running = list(self._loops)
        if self._replanning is not None:
            running.append(self._replanning)
        for task in running:
            task.cancel()
        await asyncio.gather(
            *running, self._warmer.stop(), self._runner.stop(), return_exceptions=True
        )
        await self.ledger.close()

    async def _mark_seen(self, task_ids: list[str], now: datetime) -> None:
        """A task seen for the first time has missed nothing before this instant."""
        if task_ids:
            await self.ledger.seen(task_ids, to_ms(now))

    # -- planning -------------------------------------------------------------------

    def _plans(
        self, tasks: Iterable[CronTask], now: datetime
    ) -> list[tuple[str, CronSchedule, datetime]]:
        """Each enabled task with the instant its next run comes after: its last decided
        one, or now."""
        plans = []
        for task in tasks:
            if task.spec.enabled:
                last_ms = self.ledger.runs(task.id).last_at
                after = from_ms(last_ms) if last_ms is not None else now
                plans.append((task.id, task.schedule, after))
        return plans

    def _plan(self, task: CronTask, now: datetime) -> None:
        """Put the task's next instant to consider on the timer."""
        planned = next_instants(self._plans([task], now))
        if not planned:
            self._unschedule(task.id)
            return
        self._schedule_at(*planned[0])

    def _schedule_at(self, task_id: str, due_ms: int) -> None:
        due = from_ms(due_ms)
        if self._timer.get(task_id) != due:
            self._timer.set(task_id, due)
            self._warmer.plan(task_id, due)

    def _unschedule(self, task_id: str) -> None:
        self._timer.discard(task_id)
        self._warmer.discard(task_id)

    def next_run(self, task_id: str) -> datetime | None:
        return self._timer.get(task_id)

    def preview(
        self, schedule: str, timezone: str | None, count: int, at: datetime
    ) -> list[datetime]:
        """A schedule's next ``count`` runs after ``at``, in its time zone (the default
        when None or blank): what a form shows before the task is saved (ClayError when
        the schedule or the zone is wrong)."""
        zone = (timezone or "").strip() or self.store.default_timezone
        return CronSchedule.parse(schedule, zone).next_runs(at, count)

    # -- firing ---------------------------------------------------------------------

    async def _on_due(self, now: datetime) -> None:
        try:
            await self._fire_due(now)
        except asyncio.CancelledError:
            raise
        except Exception:  # one bad moment must not stop every schedule for good
            log.exception("firing cron runs failed", extra={"action": "cron.fire_failed"})

    async def _fire_due(self, now: datetime) -> None:
        now_ms = to_ms(now)
        due = [(task_id, to_ms(when)) for task_id, when in self._timer.take_due(now)]
        if not due:
            return
        starts: list[tuple[CronTask, RunKey]] = []
        skips: list[tuple[CronTask, list[int], str]] = []
        replan: list[tuple[CronTask, int]] = []  # (task, the instant its next run comes after)
        for task_id, due_ms in due:
            task = self.tasks.get(task_id)
            if task is None or not task.spec.enabled:
                continue
            decision = decide(
                task.schedule,
                task.spec.misfire,
                due_ms=due_ms,
                now_ms=now_ms,
                last_decided_ms=self.ledger.runs(task.id).last_at,
                grace=self._grace,
            )
            replan.append((task, decision.plan_after))
            if decision.missed:
                skips.append((task, decision.missed, "missed"))
            if decision.run is not None:
                if task.spec.overlap == "skip" and self._runner.busy(task.id):
                    skips.append((task, [decision.run], "overlap"))
                else:
                    starts.append((task, RunKey(task.id, decision.run)))
        # One append and one sync for every run that fires now, before any of them starts.
        records: list[StartedRecord | SkippedRecord] = [
            r for task, times, reason in skips for r in skipped_records(task.id, times, reason)
        ]
        records += [started_record(key.task_id, key.at_ms, now_ms) for _, key in starts]
        try:
            await self.ledger.record(records)
        except OSError as exc:
            # Not recorded, so nothing of it happened: the same instants are owed still
            # and fire once the disk takes writes (late ones then follow `misfire`).
            log.error(
                "cron runs wait: the run ledger could not be written (%s)",
                exc.strerror or exc,
                extra={"action": "cron.ledger_failed", "runs": len(due)},
            )
            for task_id, due_ms in due:
                self._schedule_at(task_id, due_ms)
            await asyncio.sleep(LEDGER_RETRY_S)
            return
        if self.on_lateness is not None:
            recorded = to_ms(self.clock.now())
            for _, key in starts:
                self.on_lateness("recorded", key, (recorded - key.at_ms) / 1000)
        # Runs without a gate are posted together: one inbox batch, one sync.
        plain = [(task, key) for task, key in starts if task.spec.gate is None]
        delivered = await self._runner.post_together(plain) if plain else {}
        posted = [
            self._runner.launch(task, key, resumed=False, delivered=delivered.get(key))
            for task, key in starts
        ]
        for task, times, reason in skips:
            self.events.emit(EventType.CRON_TASK_SKIPPED,
                {"taskId": task.id, "scheduledAt": [from_ms(t).isoformat() for t in times],
                 "reason": reason},
            )  # fmt: skip
        # Computing the next instants is the costly part: it waits until the runs that
        # fire now are posted, so it adds nothing to their lateness.
        self._replanning = asyncio.create_task(self._replan(replan, posted))

    async def _replan(
        self, tasks: list[tuple[CronTask, int]], posted: list[asyncio.Future[None]]
    ) -> None:
        if posted:
            await asyncio.wait(posted, timeout=POSTING_WAIT_S)
        current = [
            (task.id, task.schedule, from_ms(after_ms))
            for task, after_ms in tasks
            if self.tasks.get(task.id) is task  # else changed or removed: planned again
        ]
        for task_id, due_ms in next_instants(current):
            if self._timer.get(task_id) is None:
                self._schedule_at(task_id, due_ms)

    async def run_now(self, task_id: str) -> RunKey:
        """A manual run (``claybot cron run``): recorded and executed like a scheduled one."""
        task = self._get(task_id)
        key = RunKey(task.id, to_ms(self.clock.now()))
        await self.ledger.started(key.task_id, key.at_ms, key.at_ms)
        self._runner.launch(task, key, resumed=False)
        return key

    # -- changes --------------------------------------------------------------------

    async def add(self, spec: CronTaskSpec, prompt: str) -> CronTask:
        """Write a new task; ScheduleError (nothing written) if its zone is unknown."""
        CronSchedule.parse(spec.schedule, spec.timezone or self.store.default_timezone)
        task = await asyncio.to_thread(self.store.create, spec, prompt)
        await self._adopt(task, source="api")
        return task

    async def set_enabled(self, task_id: str, enabled: bool) -> CronTask:
        task = self._get(task_id)
        spec = task.spec.model_copy(update={"enabled": enabled})
        await asyncio.to_thread(self.store.write_spec, task.directory, spec, task.prompt)
        updated = await asyncio.to_thread(self.store.load, task.directory)
        await self._adopt(updated, source="api")
        return updated

    async def edit(
        self, task_id: str, *, name: str, schedule: str, timezone: str | None, prompt: str
    ) -> CronTask:
        """Change a task's name, schedule, zone and prompt (ValidationError or
        ScheduleError, nothing written, when one is wrong); its runs so far stay."""
        task = self._get(task_id)
        fields = {**task.spec.model_dump(), "name": name, "schedule": schedule,
                  "timezone": timezone}  # fmt: skip
        spec = CronTaskSpec.model_validate(fields)
        CronSchedule.parse(spec.schedule, spec.timezone or self.store.default_timezone)
        await asyncio.to_thread(self.store.write_spec, task.directory, spec, prompt)
        updated = await asyncio.to_thread(self.store.load, task.directory)
        await self._adopt(updated, source="api")
        return updated

    async def run_history(self, task_id: str, limit: int) -> list[Run]:
        """The task's newest runs from the ledger, newest first."""
        self._get(task_id)
        return await asyncio.to_thread(self.ledger.history, task_id, limit)

    async def remove(self, task_id: str) -> CronTask:
        task = self._get(task_id)
        await asyncio.to_thread(self.store.delete, task)
        await self._forget(task_id)
        return task

    def _get(self, task_id: str) -> CronTask:
        task = self.tasks.get(task_id)
        if task is None:
            raise CronTaskNotFound(task_id)
        return task

    async def _adopt(self, task: CronTask, *, source: str) -> None:
        """A new or changed task (from the API or a file edited on disk)."""
        previous = self.tasks.get(task.id)
        now = self.clock.now()
        if previous is not None and not previous.spec.enabled and task.spec.enabled:
            await self._mark_seen([task.id], now)  # the disabled time owes no runs
        if previous is None:
            if self.ledger.runs(task.id).last_at is None:
                await self._mark_seen([task.id], now)
            self.events.emit(
                EventType.CRON_TASK_ADDED,
                {"taskId": task.id, "name": task.spec.name, "source": source},
            )
        elif previous.version != task.version:
            self.events.emit(EventType.CRON_TASK_UPDATED, {"taskId": task.id, "source": source})
        self.tasks[task.id] = task
        self._by_folder[task.directory.name] = task.id
        self._folders.note(task.directory.name, task.version)
        self._unschedule(task.id)
        self._plan(task, now)

    async def _forget(self, task_id: str) -> None:
        task = self.tasks.pop(task_id, None)
        if task is None:
            return
        if self._by_folder.get(task.directory.name) == task_id:
            del self._by_folder[task.directory.name]
        self._unschedule(task_id)
        await self.ledger.deleted(task_id)
        self.events.emit(EventType.CRON_TASK_REMOVED, {"taskId": task_id})

    def _report(self, problem: TaskProblem) -> None:
        log.error(
            "invalid cron task",
            extra={"action": "cron.task.invalid", "path": problem.path, "reason": problem.reason},
        )
        self.events.emit(EventType.CRON_TASK_INVALID, problem.to_dict())

    async def rescan(self, names: set[str] | None = None) -> None:
        """Pick up TASK.md files added, edited or removed: in folders ``names``, or all.

        Only folders whose TASK.md changed (size or time) are parsed again.
        """
        async with self._reload_lock:
            changes = await asyncio.to_thread(self._folders.changed, names)
            for name, found in changes:
                path = str(self.store.root / name / TASK_FILE)
                current = self._by_folder.get(name)
                self.problems = [p for p in self.problems if p.path != path]
                if isinstance(found, CronTask):
                    other = self.tasks.get(found.id)
                    if other is not None and other.directory.name != name:
                        found = TaskProblem(path, f"taskId {found.id} is also in {other.directory}")
                    else:
                        if current is not None and current != found.id:
                            await self._forget(current)  # its taskId was changed
                        await self._adopt(found, source="file")
                        continue
                if current is not None:
                    await self._forget(current)
                if isinstance(found, TaskProblem):
                    self.problems.append(found)
                    self._report(found)

    def listing(self) -> list[CronTaskListing]:
        result = []
        for task in sorted(self.tasks.values(), key=lambda t: t.spec.name):
            runs = self.ledger.runs(task.id)
            running = self._runner.busy(task.id)
            result.append(task.listing(runs.last_finished, self.next_run(task.id), running))
        return result
