"""Valid cron expressions for generated tests (the API document names their format,
``cron``, and states the language in words; no pattern can generate them)."""

from __future__ import annotations

from hypothesis import strategies as st

from claybot.scheduling.schedule import CronSchedule, ScheduleError

# (low, high) of minute, hour, day of month, month, day of week.
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
NAMED = (
    "0 9 * * MON-FRI",
    "0 0 L * *",
    "0 0 lw/2 * *",
    "0 0 * * 5L",
    "0 0 * * mon#2",
    "0 0 1 jan-Jun/2 *",
    "0 0 * * SAT-7",
)


def parses(expression: str) -> bool:
    try:
        CronSchedule.parse(expression)
    except ScheduleError:
        return False
    return True


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    base = st.one_of(
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda pair: f"{min(pair)}-{max(pair)}"),
    )
    step = st.one_of(st.just(""), st.integers(1, 30).map(lambda n: f"/{n}"))
    term = st.tuples(base, step).map("".join)
    return st.lists(term, min_size=1, max_size=3).map(",".join)


# Day 30 or 31 with only months too short for it is refused: ``parses`` drops those few.
CRON_EXPRESSIONS = st.one_of(
    st.tuples(*(_field(low, high) for low, high in BOUNDS)).map(" ".join).filter(parses),
    st.sampled_from(NAMED),
)
