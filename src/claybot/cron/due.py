"""When cron runs are due, and what a late wake-up owes (pure: time is an argument).

A task's next instant comes after the last one decided (ran or skipped) or, for a
task with none, after now. When the timer wakes more than a minute after an
instant (the engine was down, the machine asleep), ``decide`` lists every instant
owed since the last decision: those later than the grace were missed, and the
task's ``misfire`` policy says whether the newest of them still runs
(``run-once``) or none does (``skip``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from claybot.kernel.clock import from_ms, to_ms
from claybot.scheduling.schedule import CronSchedule

MINUTE_MS = 60_000
Misfire = Literal["skip", "run-once"]


def next_instants(
    plans: Iterable[tuple[str, CronSchedule, datetime]],
) -> list[tuple[str, int]]:
    """(task id, its next instant in ms) for each (task id, schedule, after); a task
    whose schedule never comes again is left out. Tasks sharing a schedule share the
    computation: 10,000 of them take a second, so callers run this in a thread."""
    memo: dict[tuple[str, str, datetime], datetime | None] = {}
    planned = []
    for task_id, schedule, after in plans:
        key = (schedule.expression, schedule.timezone, after)
        if key not in memo:
            memo[key] = schedule.next_after(after)
        upcoming = memo[key]
        if upcoming is not None:
            planned.append((task_id, to_ms(upcoming)))
    return planned


@dataclass(frozen=True)
class Decision:
    run: int | None  # the instant to run now (ms), if any
    missed: list[int]  # instants to record as skipped, oldest first
    plan_after: int  # the task's next instant comes after this one (ms)


def decide(
    schedule: CronSchedule,
    misfire: Misfire,
    *,
    due_ms: int,
    now_ms: int,
    last_decided_ms: int | None,
    grace: timedelta,
) -> Decision:
    """What to do about the instant ``due_ms``, found due at ``now_ms``."""
    if now_ms - due_ms < MINUTE_MS:
        # Cron instants are a minute apart at least: nothing else fits in (due, now].
        times = [due_ms]
        plan_after = due_ms
    else:  # the engine was down or asleep: list everything owed since the last decision
        after = from_ms(last_decided_ms if last_decided_ms is not None else due_ms - 1)
        times = [to_ms(t) for t in schedule.between(after, from_ms(now_ms))]
        plan_after = now_ms
    cutoff = now_ms - int(grace.total_seconds() * 1000)
    fresh = [t for t in times if t >= cutoff]
    stale = [t for t in times if t < cutoff]
    if fresh:
        return Decision(fresh[-1], stale + fresh[:-1], plan_after)
    if stale and misfire == "run-once":
        return Decision(stale[-1], stale[:-1], plan_after)
    return Decision(None, stale, plan_after)
