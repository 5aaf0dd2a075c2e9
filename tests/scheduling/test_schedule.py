"""Cron expressions in a time zone: DST in a European and an American zone, bad input."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from claybot.scheduling.schedule import CronSchedule, ScheduleError


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "start", "end", "expected"),
    [
        # Europe/Berlin springs forward on 2026-03-29 at 02:00 -> 03:00: 02:30 does not
        # exist that day and runs once, at 03:00 CEST (01:00 UTC).
        (
            "Europe/Berlin",
            utc(2026, 3, 28),
            utc(2026, 3, 31),
            [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)],
        ),
        # New York springs forward on 2026-03-08: 02:30 EST/EDT runs once at 03:00 EDT.
        (
            "America/New_York",
            utc(2026, 3, 7),
            utc(2026, 3, 10),
            [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)],
        ),
    ],
)
def test_a_nonexistent_local_time_runs_once(
    zone: str, start: datetime, end: datetime, expected: list[datetime]
) -> None:
    assert CronSchedule.parse("30 2 * * *", zone).between(start, end) == expected


@pytest.mark.parametrize(
    ("zone", "expression", "start", "end", "expected"),
    [
        # Berlin falls back on 2026-10-25 at 03:00 -> 02:00: 02:30 happens twice, runs once.
        (
            "Europe/Berlin",
            "30 2 * * *",
            utc(2026, 10, 24),
            utc(2026, 10, 27),
            [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
        ),
        # New York falls back on 2026-11-01 at 02:00 -> 01:00: 01:30 happens twice, runs once.
        (
            "America/New_York",
            "30 1 * * *",
            utc(2026, 10, 31),
            utc(2026, 11, 3),
            [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)],
        ),
    ],
)
def test_an_ambiguous_local_time_runs_once(
    zone: str, expression: str, start: datetime, end: datetime, expected: list[datetime]
) -> None:
    schedule = CronSchedule.parse(expression, zone)
    assert schedule.between(start, end) == expected
    # Recomputing from the run itself (as after a restart) never yields the second fold.
    assert schedule.next_after(expected[1]) == expected[2]


def test_an_interval_job_keeps_its_rhythm_through_the_repeated_hour() -> None:
    schedule = CronSchedule.parse("0 * * * *", "America/New_York")
    runs = schedule.between(utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 8, 30))
    assert runs == [utc(2026, 11, 1, hour) for hour in (5, 6, 7, 8)]  # hourly in real time


@pytest.mark.parametrize(
    ("expression", "zone", "problem"),
    [
        ("* * * *", "UTC", "must have 5 fields"),
        ("0 * * * * *", "UTC", "must have 5 fields"),
        ("61 * * * *", "UTC", "Bad minute"),
        ("* * * * *", "Mars/Olympus", "unknown time zone"),
        ("* * * * *", "../../etc/passwd", "unknown time zone"),
        ("", "UTC", "empty"),
    ],
)
def test_bad_schedules_are_explained(expression: str, zone: str, problem: str) -> None:
    with pytest.raises(ScheduleError, match=problem):
        CronSchedule.parse(expression, zone)
