"""When runs are due and what a late wake-up owes: pure, the time is an argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from claybot.cron.due import Decision, decide, next_instants
from claybot.kernel.clock import to_ms
from claybot.scheduling.schedule import CronSchedule

EVERY_5 = CronSchedule.parse("*/5 * * * *")
GRACE = timedelta(seconds=60)


def ms(hour: int, minute: int, second: int = 0) -> int:
    return to_ms(datetime(2026, 6, 1, hour, minute, second, tzinfo=UTC))


def test_an_instant_found_on_time_runs_and_owes_nothing_else() -> None:
    decision = decide(
        EVERY_5, "skip", due_ms=ms(10, 5), now_ms=ms(10, 5, 2), last_decided_ms=None, grace=GRACE
    )
    assert decision == Decision(ms(10, 5), [], ms(10, 5))


def test_a_late_wake_up_runs_the_newest_fresh_instant_and_skips_the_rest() -> None:
    decision = decide(
        EVERY_5,
        "skip",
        due_ms=ms(10, 5),
        now_ms=ms(10, 30, 30),
        last_decided_ms=ms(10, 0),
        grace=GRACE,
    )
    missed = [ms(10, minute) for minute in (5, 10, 15, 20, 25)]
    assert decision == Decision(ms(10, 30), missed, ms(10, 30, 30))


def test_instants_past_the_grace_follow_the_misfire_policy() -> None:
    owed = [ms(10, minute) for minute in (5, 10, 15, 20, 25, 30)]
    late = {"due_ms": ms(10, 5), "now_ms": ms(10, 32), "last_decided_ms": ms(10, 0)}
    run_once = decide(EVERY_5, "run-once", **late, grace=GRACE)
    assert run_once == Decision(owed[-1], owed[:-1], ms(10, 32))
    skip = decide(EVERY_5, "skip", **late, grace=GRACE)
    assert skip == Decision(None, owed, ms(10, 32))


def test_next_instants_come_strictly_after_and_leave_none_out() -> None:
    after = datetime(2026, 6, 1, 10, 5, tzinfo=UTC)
    hourly = CronSchedule.parse("0 * * * *")
    planned = next_instants([("a", EVERY_5, after), ("b", EVERY_5, after), ("c", hourly, after)])
    assert planned == [("a", ms(10, 10)), ("b", ms(10, 10)), ("c", ms(11, 0))]
