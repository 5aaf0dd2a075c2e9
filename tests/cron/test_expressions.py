"""The cron language as cronsim takes it: what is accepted, and what a refusal says."""

from __future__ import annotations

import pytest

from claybot.scheduling.schedule import CronSchedule, ScheduleError
from tests.cron.expressions import NAMED


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "*/15 * * * *",
        "  0   9 * * 1-5  ",
        "00 09 01 01 00",
        "0\t9 * *   *",
        "0 0 1 FEB-3 *",
        "1,2,3-9/5 0-23/05 1-31 * *",
        "5/10 * * * *",
        "59 23 31 12 6",
        "0 0 31 4,6 1",  # day 31 or Monday: the weekday alone can match
        "0 0 29 2 *",
        "0005 * * * */1000",
        *NAMED,
    ],
)
def test_valid_schedules_parse(expression: str) -> None:
    assert CronSchedule.parse(expression).expression == " ".join(expression.split())


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "empty"),
        ("* * * *", "must have 5 fields"),
        ("* * * * * *", "must have 5 fields"),
        ("60 * * * *", "Bad minute"),
        ("5-3 * * * *", "Bad minute"),
        ("*/0 * * * *", "Bad minute"),
        ("1,,2 * * * *", "Bad minute"),
        ("a b c d e", "Bad minute"),
        ("* 24 * * *", "Bad hour"),
        ("* * 0 * *", "Bad day-of-month"),
        ("* * 32 * *", "Bad day-of-month"),
        ("* * 5L * *", "Bad day-of-month"),
        ("0 0 30 2 *", "Bad day-of-month"),  # a day none of its months has
        ("0 0 31 4,6,09 *", "Bad day-of-month"),
        ("0 0 30,31 feb *", "Bad day-of-month"),
        ("* * * 13 *", "Bad month"),
        ("* * * DEC-JAN *", "Bad month"),
        ("* * * JAN/0 *", "Bad month"),
        ("* * * * 8", "Bad day-of-week"),
        ("* * * * L", "Bad day-of-week"),
        ("* * * * MON#6", "Bad day-of-week"),
        ("* * * * 1-2#1", "Bad day-of-week"),
    ],
)
def test_a_refusal_names_the_expression_and_the_field(expression: str, reason: str) -> None:
    with pytest.raises(ScheduleError) as refused:
        CronSchedule.parse(expression)
    assert reason in str(refused.value)
    if expression.strip():
        assert repr(expression) in str(refused.value)
    assert refused.value.field == "schedule"
