"""The document's cron pattern against the engine's cron parser: they must agree."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from claybot.api.cron_pattern import cron_pattern, impossible_day_pattern, number_range
from claybot.scheduling.schedule import CronSchedule, ScheduleError

PATTERN = re.compile(cron_pattern())
IMPOSSIBLE = re.compile(impossible_day_pattern())


def documented(expression: str) -> bool:
    return PATTERN.search(expression) is not None and IMPOSSIBLE.search(expression) is None


def parses(expression: str) -> bool:
    try:
        CronSchedule.parse(expression)
    except ScheduleError:
        return False
    return True


def test_number_range_matches_exactly_its_numbers() -> None:
    for low in range(32):
        for high in range(low, 60):
            expression = re.compile(f"^{number_range(low, high)}$")
            assert [n for n in range(100) if expression.match(str(n))] == list(
                range(low, high + 1)
            ), (low, high)


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "0 9 * * MON-FRI",
        "*/15 * * * *",
        "  0   9 * * 1-5  ",
        "00 09 01 01 00",
        "0\t9 * *   *",
        "0 0 L * *",
        "0 0 lw/2 * *",
        "0 0 * * 5L",
        "0 0 * * mon#2",
        "0 0 * * 7",
        "0 0 * * SAT-7",
        "0 0 1 jan-Jun/2 *",
        "0 0 1 FEB-3 *",
        "1,2,3-9/5 0-23/05 1-31 * *",
        "5/10 * * * *",
        "59 23 31 12 6",
        "0 0 31 4,6 1",  # day 31 or Monday: the weekday alone can match
        "0 0 29 2 *",
    ],
)
def test_valid_schedules_are_documented(expression: str) -> None:
    assert parses(expression)
    assert documented(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "* * * *",
        "* * * * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "5-3 * * * *",
        "* * * DEC-JAN *",
        "*/0 * * * *",
        "* * * * L",
        "* * 5L * *",
        "* * * * MON#6",
        "* * * * 1-2#1",
        "* * * JAN/0 *",
        "1,,2 * * * *",
        "a b c d e",
        "0 0 30 2 *",
        "0 0 31 4,6,09 *",
        "0 0 30,31 feb *",
    ],
)
def test_invalid_schedules_are_not_documented(expression: str) -> None:
    assert not parses(expression)
    assert not documented(expression)


@settings(
    max_examples=50,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.from_regex(PATTERN, fullmatch=True).filter(lambda text: len(text) <= 256))
def test_every_documented_schedule_parses(expression: str) -> None:
    if IMPOSSIBLE.search(expression) is None:
        assert parses(expression), expression


NAMES = ["JAN", "feb", "Dec", "MON", "sun", "SAT", "L", "LW", "l", "W"]
VALUE = st.one_of(
    st.integers(1, 7).map(str),  # in every field's range, so whole expressions parse too
    st.integers(0, 64).map(str),
    st.integers(0, 9).map(lambda n: f"0{n}"),
    st.sampled_from(NAMES),
)
BASE = st.one_of(
    st.just("*"),
    VALUE,
    st.tuples(VALUE, VALUE).map("-".join),
    st.tuples(VALUE, st.integers(0, 6)).map(lambda pair: f"{pair[0]}#{pair[1]}"),
    st.integers(0, 9).map(lambda n: f"{n}L"),
)
TERM = st.tuples(BASE, st.one_of(st.just(""), st.integers(0, 40).map(lambda n: f"/{n}"))).map(
    "".join
)
FIELD = st.lists(TERM, min_size=1, max_size=3).map(",".join)
# What the pattern leaves out: two or more leading zeros, a step of four digits, a
# name (or L, W) in mixed case.
LONG_SPELLING = re.compile(r"(?<![0-9])00[0-9]|/[0-9]{4}|[A-Za-z]*(?:[a-z][A-Z]|[A-Z]{2}[a-z])")


@settings(
    max_examples=500,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(FIELD, min_size=5, max_size=5).map(" ".join))
@example("0 0 31 4/5 *")
@example("0005 * * * */1000")
def test_the_pattern_and_the_parser_agree(expression: str) -> None:
    if parses(expression):
        # Unless it is spelled in a way the pattern leaves out to keep examples short.
        assert documented(expression) or LONG_SPELLING.search(expression), expression
    elif documented(expression):
        # The one refusal the pattern leaves to the engine: a stepped month list that
        # lands only on months without that day.
        fields = expression.split()
        assert "/" in fields[3] and fields[2].startswith("3"), expression
