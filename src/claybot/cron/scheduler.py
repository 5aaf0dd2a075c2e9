"""The cron scheduler: fires each task at its scheduled instants, exactly once.

One timer for all tasks (``DueTimer``: each task's next instant and a single sleep
until the earliest), so 10,000 idle tasks cost nothing between runs. When an instant
comes, the run (task, instant) is recorded in the ledger *before* anything else
happens; the prompt then goes to the task's agent under the message id
``cron:<taskId>:<instant ms>``. A restart finds started-but-unfinished runs in
the ledger and posts them again under the same id (the inbox drops a repeat),
so a run never happens twice. Instants that passed while the engine was down
follow the task's ``misfire`` policy: ``skip`` runs none of them, ``run-once``
runs the newest one.

It is longer than most modules because firing, misfire handling, warming and the
reaction to edited task files all change one plan (each task's next instant) and
one ledger under one lock; split apart, the rule "recorded before anything else
happens, exactly once" would have to be checked across files. Its parts that stand
alone already live beside it: the task files (``store.py``), the ledger
(``ledger.py``), the timer (``scheduling/due_timer.py``), the gates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from claybot.cron.ledger import Run, RunLedger, Status, skipped_records, started_record
from claybot.cron.store import TASK_FILE, CronStore, CronTask, TaskProblem
from claybot.cron.task import CronTaskNotFound, CronTaskSpec, TaskFileError
from claybot.kernel.clock import Clock, from_ms, to_ms
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.sandbox import SandboxRunner
from claybot.scheduling.due_timer import DueTimer
from claybot.scheduling.gate import GateGrant, GateRefused, GateResult, run_gate
from claybot.scheduling.schedule import CronSchedule

log = logging.getLogger(__name__)

MISFIRE_GRACE = timedelta(seconds=60)  # a run later than this was missed, not just late
MINUTE_MS = 60_000
POSTING_WAIT_S = 5.0  # at most this long before the next instants are planned anyway
# Fifteen seconds before its instant a run's agent is loaded (or created), so that
# 1,000 runs due together are posted in milliseconds rather than after 1,000 loads.
WARM_AHEAD = timedelta(seconds=15)
WARM_CONCURRENCY = 64
RESCAN_FALLBACK_S = 5.0  # polling interval when file watching is unavailable
LEDGER_RETRY_S = 1.0  # pause before trying again when the ledger cannot be written


class CronHost(Protocol):
    """What the scheduler needs from the engine: posting a run and waiting for it."""

    async def post_run(self, task: CronTask, message_id: str, text: str) -> tuple[str, str]:
        """Post the run's prompt; (agent id, item id). Raises LookupError for a bad agentId."""
        ...

    async def wait_run(self, agent_id: str, item_id: str) -> bool:
        """Until the agent has processed the item; whether its turn succeeded."""
        ...

    async def prepare_run(self, task: CronTask) -> None:
        """Have the run's agent loaded (created if new): the run is due in a moment."""
        ...

    async def post_runs(
        self, runs: list[tuple[CronTask, str, str]]
    ) -> list[tuple[str, str] | Exception]:
        """Post several runs (task, message id, prompt) in one batch; per run, its
        (agent id, item id) or the error that kept it from being posted."""
        ...

    async def gate_grant(self, made_by: str | None, folder: str) -> GateGrant:
        """Where a gate runs and what it sees: ``folder`` for the owner's, the maker's
        grants for an agent's. GateRefused when it may not run at all."""
        ...


@dataclass(frozen=True)
class RunKey:
    task_id: str
    at_ms: int

    @property
    def message_id(self) -> str:
        return f"cron:{self.task_id}:{self.at_ms}"


def run_prompt(task: CronTask, at: datetime, gate_output: str | None) -> str:
    local = at.astimezone(task.schedule.zone)
    lines = [
        f'[Cron task "{task.spec.name}" ({task.id}), scheduled for '
        f"{local.isoformat(timespec='minutes')} {task.schedule.timezone}]",
        f"Files folder: {task.files_path}",
        "",
        task.prompt,
    ]
    if gate_output:
        lines += ["", "[Gate output]", gate_output]
    return "\n".join(lines)


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
        self.host = host
        self.events = events
        self.clock = clock
        self.tasks: dict[str, CronTask] = {}
        self.problems: list[TaskProblem] = []
        self._watch = watch
        self._grace = misfire_grace
        # Each task's next instant. Cron instants are whole seconds, so the milliseconds
        # a run is keyed by come back exactly from the datetime kept here.
        self._timer = DueTimer(clock)
        self._warm_timer = DueTimer(clock)  # when to load each task's agent, ahead of its instant
        self._inflight: dict[RunKey, asyncio.Task[None]] = {}
        self._running: dict[str, int] = {}  # task id -> runs in flight
        self._replanning: asyncio.Task[None] | None = None
        self._warming: set[asyncio.Task[None]] = set()
        self._by_folder: dict[str, str] = {}  # task folder name -> task id
        self._versions: dict[str, tuple[int, int]] = {}  # folder -> its TASK.md (mtime, size)
        self._gates = gates
        self._loops: list[asyncio.Task[None]] = []
        self._reload_lock = asyncio.Lock()
        # Lateness hooks (the benchmark): ("recorded" | "posted", run, seconds late).
        self.on_lateness: Callable[[str, RunKey, float], None] | None = None

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
                self._versions[folder.name] = version
        for task in tasks.values():
            self.tasks[task.id] = task
            self._by_folder[task.directory.name] = task.id
            self._versions[task.directory.name] = task.version
            if self.ledger.runs(task.id).last_at is None:
                first_seen.append(task.id)
        await self._mark_seen(first_seen, now)
        # Ten thousand next-instant computations take a second: off the event loop.
        planned = await asyncio.to_thread(self._first_instants, list(self.tasks.values()), now)
        for task_id, due_ms in planned:
            self._schedule_at(task_id, due_ms)
        for problem in problems:
            self._report(problem)
        # Runs that started before a restart and never finished: post again, same id.
        for task_id, runs in list(self.ledger.tasks.items()):
            unfinished = self.tasks.get(task_id)
            for at_ms in sorted(runs.running):
                if unfinished is not None:
                    self._launch(unfinished, RunKey(task_id, at_ms), resumed=True)
        self._loops = [
            asyncio.create_task(self._timer.run(self._on_due), name="cron-timer"),
            asyncio.create_task(self._warm_timer.run(self._warm_due), name="cron-warm-timer"),
        ]
        if self._watch:
            self._loops.append(asyncio.create_task(self._watch_files(), name="cron-watch"))
        self.events.emit(
            EventType.CRON_STARTED, {"tasks": len(self.tasks), "problems": len(self.problems)}
        )

    async def stop(self) -> None:
        running = [*self._loops, *self._inflight.values(), *self._warming]
        if self._replanning is not None:
            running.append(self._replanning)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        self._inflight.clear()
        await self.ledger.close()

    async def _mark_seen(self, task_ids: list[str], now: datetime) -> None:
        """A task seen for the first time has missed nothing before this instant."""
        if task_ids:
            await self.ledger.seen(task_ids, to_ms(now))

    # -- planning -------------------------------------------------------------------

    def _plan(self, task: CronTask, now: datetime) -> None:
        """Put the task's next instant to consider on the timer."""
        planned = self._first_instants([task], now)
        if not planned:
            self._unschedule(task.id)
            return
        self._schedule_at(*planned[0])

    def _schedule_at(self, task_id: str, due_ms: int) -> None:
        due = from_ms(due_ms)
        if self._timer.get(task_id) != due:
            self._timer.set(task_id, due)
            self._warm_timer.set(task_id, due - WARM_AHEAD)

    def _unschedule(self, task_id: str) -> None:
        self._timer.discard(task_id)
        self._warm_timer.discard(task_id)

    def _first_instants(self, tasks: list[CronTask], now: datetime) -> list[tuple[str, int]]:
        """Each enabled task's next instant after its last decided one (pure; run in a thread)."""
        memo: dict[tuple[str, str, int | None], datetime | None] = {}  # shared schedules
        planned = []
        for task in tasks:
            if not task.spec.enabled:
                continue
            last_ms = self.ledger.runs(task.id).last_at
            key = (task.schedule.expression, task.schedule.timezone, last_ms)
            if key not in memo:
                after = from_ms(last_ms) if last_ms is not None else now
                memo[key] = task.schedule.next_after(after)
            upcoming = memo[key]
            if upcoming is not None:
                planned.append((task.id, to_ms(upcoming)))
        return planned

    def next_run(self, task_id: str) -> datetime | None:
        return self._timer.get(task_id)

    async def _on_due(self, now: datetime) -> None:
        try:
            await self._fire_due(now)
        except asyncio.CancelledError:
            raise
        except Exception:  # one bad moment must not stop every schedule for good
            log.exception("firing cron runs failed", extra={"action": "cron.fire_failed"})

    async def _warm_due(self, now: datetime) -> None:
        """Load (or create) the agents of runs due within WARM_AHEAD, so firing is quick."""
        tasks: list[CronTask] = []
        for task_id, warm_at in self._warm_timer.take_due(now):
            task = self.tasks.get(task_id)
            due = self._timer.get(task_id)
            if task is not None and due == warm_at + WARM_AHEAD and due > now:
                tasks.append(task)
        if tasks:
            warming = asyncio.create_task(self._warm(tasks), name="cron-warm")
            self._warming.add(warming)
            warming.add_done_callback(self._warming.discard)

    async def _warm(self, tasks: list[CronTask]) -> None:
        limit = asyncio.Semaphore(WARM_CONCURRENCY)

        async def one(task: CronTask) -> None:
            async with limit:
                try:
                    await self.host.prepare_run(task)
                except Exception:  # the run itself will report a real problem
                    log.debug("warming a cron agent failed", exc_info=True)

        await asyncio.gather(*(one(task) for task in tasks))

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
            run, missed, after_ms = self._decide(task, now_ms, due_ms)
            replan.append((task, after_ms))
            if missed:
                skips.append((task, missed, "missed"))
            if run is not None:
                key = RunKey(task.id, run)
                if task.spec.overlap == "skip" and self._running.get(task.id):
                    skips.append((task, [run], "overlap"))
                else:
                    starts.append((task, key))
        # One append and one sync for every run that fires now, before any of them starts.
        records = [
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
        delivered: dict[RunKey, tuple[str, str] | Exception] = {}
        if plain:
            prompts = [
                (task, key.message_id, run_prompt(task, from_ms(key.at_ms), None))
                for task, key in plain
            ]
            try:
                results = await self.host.post_runs(prompts)
                delivered = {key: result for (_, key), result in zip(plain, results, strict=True)}
                for task, key in plain:
                    result = delivered[key]
                    if not isinstance(result, Exception):
                        self._started(task, key, result[0], resumed=False)
            except asyncio.CancelledError:
                raise
            except Exception:  # each run then posts on its own and reports its own error
                log.exception("posting cron runs together failed", extra={"action": "cron.batch"})
        posted = [
            self._launch(task, key, resumed=False, delivered=delivered.get(key))
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
        memo: dict[tuple[str, str, int], datetime | None] = {}  # tasks sharing a schedule
        for task, after_ms in tasks:
            if self.tasks.get(task.id) is not task:
                continue  # changed or removed meanwhile: already planned again
            key = (task.schedule.expression, task.schedule.timezone, after_ms)
            if key not in memo:
                memo[key] = task.schedule.next_after(from_ms(after_ms))
            following = memo[key]
            if following is not None and self._timer.get(task.id) is None:
                self._schedule_at(task.id, to_ms(following))

    def _decide(
        self, task: CronTask, now_ms: int, due_ms: int
    ) -> tuple[int | None, list[int], int]:
        """(the instant to run or None; the missed instants to skip; plan the next after this)."""
        if now_ms - due_ms < MINUTE_MS:
            # Cron instants are a minute apart at least: nothing else fits in (due, now].
            times = [due_ms]
            plan_after = due_ms
        else:  # the engine was down or asleep: list everything owed since the last decision
            last_ms = self.ledger.runs(task.id).last_at
            after = from_ms(last_ms if last_ms is not None else due_ms - 1)
            times = [to_ms(t) for t in task.schedule.between(after, from_ms(now_ms))]
            plan_after = now_ms
        cutoff = now_ms - int(self._grace.total_seconds() * 1000)
        fresh = [t for t in times if t >= cutoff]
        stale = [t for t in times if t < cutoff]
        if fresh:
            return fresh[-1], stale + fresh[:-1], plan_after
        if stale and task.spec.misfire == "run-once":
            return stale[-1], stale[:-1], plan_after
        return None, stale, plan_after

    # -- running --------------------------------------------------------------------

    def _launch(
        self,
        task: CronTask,
        key: RunKey,
        *,
        resumed: bool,
        delivered: tuple[str, str] | Exception | None = None,
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

    async def run_now(self, task_id: str) -> RunKey:
        """A manual run (``claybot cron run``): recorded and executed like a scheduled one."""
        task = self.tasks.get(task_id)
        if task is None:
            raise CronTaskNotFound(task_id)
        now = self.clock.now()
        key = RunKey(task.id, to_ms(now))
        await self.ledger.started(key.task_id, key.at_ms, key.at_ms)
        self._launch(task, key, resumed=False)
        return key

    async def _execute(
        self,
        task: CronTask,
        key: RunKey,
        resumed: bool,
        posted: asyncio.Future[None],
        delivered: tuple[str, str] | Exception | None = None,
    ) -> None:
        at = from_ms(key.at_ms)
        try:
            if isinstance(delivered, Exception):
                raise delivered
            if delivered is not None:  # posted with the others of its moment, reported there
                agent_id, item_id = delivered
                posted.set_result(None)
                succeeded = await self.host.wait_run(agent_id, item_id)
                await self._finish(task, key, "ran" if succeeded else "failed", agent_id, None)
                return
            gate_output: str | None = None
            if task.spec.gate is not None:
                gate: GateResult
                try:
                    grant = await self.host.gate_grant(task.spec.createdBy, task.files_path)
                except GateRefused as exc:
                    gate = GateResult(False, "", None, f"the gate may not run: {exc}")
                else:
                    gate = await run_gate(
                        self._gates, task.spec.gate.command, grant, task.spec.gate.timeoutMs / 1000
                    )
                if not gate.passed:
                    await self.ledger.finished(
                        task.id, key.at_ms, "skipped", to_ms(self.clock.now())
                    )
                    self.events.emit(EventType.CRON_TASK_SKIPPED,
                        {"taskId": task.id, "scheduledAt": [at.isoformat()], "reason": "gate",
                         "detail": gate.reason, "output": gate.output[-2000:]},
                    )  # fmt: skip
                    return
                gate_output = gate.output or None
            agent_id, item_id = await self.host.post_run(
                task, key.message_id, run_prompt(task, at, gate_output)
            )
            posted.set_result(None)
            self._started(task, key, agent_id, resumed)
            succeeded = await self.host.wait_run(agent_id, item_id)
        except asyncio.CancelledError:
            raise  # shutdown: the run stays started; the next boot finishes it
        except Exception as exc:
            log.exception("cron run failed", extra={"action": "cron.run_failed", "taskId": task.id})
            await self._finish(task, key, "failed", None, str(exc))
            return
        await self._finish(task, key, "ran" if succeeded else "failed", agent_id, None)

    def _started(self, task: CronTask, key: RunKey, agent_id: str, resumed: bool) -> None:
        """The run's prompt is durably in its agent's inbox."""
        at = from_ms(key.at_ms)
        lateness = (self.clock.now() - at).total_seconds()
        if self.on_lateness is not None:
            self.on_lateness("posted", key, lateness)
        if not resumed:
            self.events.emit(
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
        now = self.clock.now()
        await self.ledger.finished(task.id, key.at_ms, status, to_ms(now))
        self._release(key)  # finished: the next instant is not an overlap
        payload: dict[str, Any] = {
            "taskId": task.id,
            "scheduledAt": from_ms(key.at_ms).isoformat(),
            "status": status,
            "agentId": agent_id,
        }
        if error:
            payload["error"] = error
        self.events.emit(EventType.CRON_TASK_RAN, payload)
        state = {
            "lastRunAt": now.isoformat(),
            "lastScheduledAt": from_ms(key.at_ms).isoformat(),
            "lastStatus": status,
            "agentId": agent_id,
        }
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self.store.write_state, task, state)
        if status == "ran" and task.spec.deleteAfterRun:
            await self.remove(task.id)

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
        self._versions[task.directory.name] = task.version
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
            changes = await asyncio.to_thread(self._changed_folders, names)
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

    def _changed_folders(
        self, names: set[str] | None
    ) -> list[tuple[str, CronTask | TaskProblem | None]]:
        """(folder, its task, its problem, or None when gone) for folders that changed."""
        if names is None:
            names = {path.name for path in self.store.task_dirs()} | set(self._versions)
        changes: list[tuple[str, CronTask | TaskProblem | None]] = []
        for name in sorted(names):
            directory = self.store.root / name
            version = self.store.version_of(directory)
            if version == self._versions.get(name):
                continue
            if version is None:
                self._versions.pop(name, None)
                changes.append((name, None))
                continue
            self._versions[name] = version
            try:
                changes.append((name, self.store.load(directory)))
            except (TaskFileError, OSError) as exc:
                changes.append((name, TaskProblem(str(directory / TASK_FILE), str(exc))))
        return changes

    async def _watch_files(self) -> None:
        try:
            from watchfiles import awatch

            root = self.store.root

            def task_files(_: Any, path: str) -> bool:
                # A TASK.md, or a task folder appearing or going; not STATE.json,
                # MEMORY.md, files/ or the run ledger, which change at every run.
                parts = Path(path).relative_to(root).parts
                return len(parts) == 1 or (len(parts) == 2 and parts[1] == TASK_FILE)

            async for changes in awatch(root, watch_filter=task_files, debounce=200, step=50):
                names = {Path(path).relative_to(root).parts[0] for _, path in changes}
                await self.rescan({name for name in names if not name.startswith(".")})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning(
                "watching cron files failed; polling instead",
                extra={"action": "cron.watch_fallback"},
                exc_info=True,
            )
            while True:
                await asyncio.sleep(RESCAN_FALLBACK_S)
                await self.rescan()

    def listing(self) -> list[dict[str, Any]]:
        result = []
        for task in sorted(self.tasks.values(), key=lambda t: t.spec.name):
            runs = self.ledger.runs(task.id)
            running = bool(self._running.get(task.id))
            result.append(task.listing(runs.last_finished, self.next_run(task.id), running))
        return result
