"""The 5-field cron language of ``CronSchedule.parse`` as a JSON Schema ``pattern`` (pure).

The document has to say which schedules the engine takes, or a client (and the
conformance test) can only find out by being refused. The expression is written
from cronsim's rules (tests/ipc/test_cron_pattern.py checks that the two agree), and
it is exact about what cronsim refuses:
values out of range, ranges that run backwards (``5-3``), a zero step, ``L``/``LW``
outside day-of-month, ``L``/``#`` outside day-of-week, names where numbers belong.

What a regular expression cannot say is one rule across fields: a day of month that
no month reaches (``0 0 30 2 *``). ``impossible_day_pattern()`` matches the plain
spellings of it (day numbers, lists and ranges; months as numbers, names and lists)
for the schema's ``not``; a step that lands only on short months (``31 0 31 4/5 *``)
is still refused by the engine alone.

Some spellings the parser reads too are left out, to keep examples generated from
the pattern short (``0*`` makes them hundreds of characters long) and the pattern
quick to build a generator from (schemathesis builds one per test case, in time
proportional to the pattern): at most one leading zero (``05``), steps up to 999,
spaces or tabs between fields, and names (and ``L``, ``W``) in upper, lower or title
case (``MON``, ``mon``, ``Mon``; cronsim also takes ``mOn``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# The longest each month gets (February 29), as cronsim checks it.
DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

SPACE = r"[ \t]+"  # between fields
START = r"^[ \t]*"
END = r"[ \t]*$"


def _any_case(text: str) -> str:
    """A name in upper, lower or title case (cronsim takes any mix of cases)."""
    return _alternatives(dict.fromkeys([text.upper(), text.lower(), text.title()]))


def _alternatives(parts: Iterable[str]) -> str:
    return "(?:" + "|".join(parts) + ")"


def number_range(low: int, high: int) -> str:
    """Decimal numbers ``low..high`` (both at most 99), written without leading zeros."""
    parts: list[str] = []
    if low <= 9:
        top = min(high, 9)
        parts.append(str(low) if low == top else f"[{low}-{top}]")
    tens_low, tens_high = max(low, 10) // 10, high // 10
    for tens in range(tens_low, tens_high + 1):
        first = low % 10 if tens * 10 < low else 0
        last = high % 10 if tens == tens_high else 9
        if tens * 10 + first > high:
            break
        parts.append(f"{tens}" + (str(first) if first == last else f"[{first}-{last}]"))
    return _alternatives(parts)


@dataclass(frozen=True)
class CronField:
    low: int
    high: int
    names: Sequence[str] = ()  # names[i] stands for the value ``names_from + i``
    names_from: int = 0

    def value(self, low: int | None = None) -> str:
        """One value of this field, at least ``low``: a number (one leading zero) or a name."""
        start = self.low if low is None else low
        parts = [f"0?{number_range(start, self.high)}"]
        parts += [
            _any_case(name)
            for offset, name in enumerate(self.names)
            if self.names_from + offset >= start
        ]
        return _alternatives(parts)

    def ranges(self) -> str:
        """``a-b`` with ``a <= b``."""
        if not self.names:
            return _alternatives(number_pairs(self.low, self.high))
        # With names, each start (as a number or a name) and the ends it allows.
        starts: list[str] = []
        for start in range(self.low, self.high + 1):
            spellings = [f"0?{start}"]
            index = start - self.names_from
            if 0 <= index < len(self.names):
                spellings.append(_any_case(self.names[index]))
            starts.append(f"{_alternatives(spellings)}-{self.value(start)}")
        return _alternatives(starts)


def _digits(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def number_pairs(low: int, high: int) -> list[str]:
    """``a-b`` for numbers ``low <= a <= b <= high`` (at most 99), in few alternatives.

    By the digits of ``a`` and ``b``: both one digit, one then two, two digits with
    ``b``'s tens larger, and two digits with the same tens, where only the units
    need comparing.
    """
    parts: list[str] = []
    one_digit_high = min(high, 9)
    for a in range(low, one_digit_high + 1):
        parts.append(f"0?{a}-0?{_digits(a, one_digit_high)}")
    if low <= 9 < high:
        parts.append(f"0?{_digits(low, 9)}-0?{number_range(10, high)}")
    high_tens = high // 10
    for tens in range(max(low, 10) // 10, high_tens + 1):
        first = max(low, tens * 10) % 10
        last = high % 10 if tens == high_tens else 9
        if tens < high_tens:
            later = number_range((tens + 1) * 10, high)
            parts.append(f"0?{tens}{_digits(first, 9)}-0?{later}")
        same_tens = "|".join(
            f"{units}-0?{tens}{_digits(units, last)}" for units in range(first, last + 1)
        )
        parts.append(f"0?{tens}(?:{same_tens})")
    return parts


STEP = r"(?:/0?[1-9][0-9]{0,2})?"  # optional; a positive number, as zero is refused


def _field(field: CronField, extra_terms: Sequence[str] = ()) -> str:
    stepped = _alternatives([r"\*", field.ranges(), field.value()]) + STEP
    term = _alternatives([stepped, *extra_terms])
    return f"{term}(?:,{term})*"


MINUTE = CronField(0, 59)
HOUR = CronField(0, 23)
DAY = CronField(1, 31)
MONTH = CronField(1, 12, MONTH_NAMES, names_from=1)
WEEKDAY = CronField(0, 7, DAY_NAMES, names_from=0)

# Day of month: the last day (L) and the last weekday (LW), each with an optional step.
_DAY_EXTRA = (_alternatives([_any_case("LW"), _any_case("L")]) + STEP,)
# Day of week: the last given weekday of the month (5L, digits only) and the nth (MON#2).
_WEEKDAY_EXTRA = (
    f"0?[0-7]{_any_case('L')}",
    f"{WEEKDAY.value()}#0?[1-5]",
)


@cache
def cron_pattern() -> str:
    fields = [
        _field(MINUTE),
        _field(HOUR),
        _field(DAY, _DAY_EXTRA),
        _field(MONTH),
        _field(WEEKDAY, _WEEKDAY_EXTRA),
    ]
    return START + SPACE.join(f"(?:{field})" for field in fields) + END


def _only(terms: Sequence[str]) -> str:
    term = _alternatives(terms)
    return f"{term}(?:,{term})*"


def _month_values(months: Iterable[int]) -> list[str]:
    return [f"0?{month}" for month in months] + [_any_case(MONTH_NAMES[m - 1]) for m in months]


@cache
def impossible_day_pattern() -> str:
    """Schedules whose day of month falls in none of their months (cronsim refuses them).

    cronsim checks this only when the day-of-week field starts with ``*`` (the days
    must then match both fields), and only for days above 29.
    """
    short = [m for m in range(1, 13) if DAYS_IN_MONTH[m - 1] < 31]
    february = [m for m in range(1, 13) if DAYS_IN_MONTH[m - 1] < 30]
    thirty_first = _only(["0?31", "0?31-0?31"])
    thirty_or_later = _only(["0?3[01]", "0?30-0?3[01]", "0?31-0?31"])
    cases = [
        (thirty_first, _only(_month_values(short))),
        (thirty_or_later, _only(_month_values(february))),
    ]
    any_field = r"[^ \t]+"
    starred = r"\*[^ \t]*"
    return (
        START
        + _alternatives(
            SPACE.join([any_field, any_field, f"(?:{days})", f"(?:{months})", starred])
            for days, months in cases
        )
        + END
    )


CRON_DESCRIPTION = (
    "A 5-field cron expression: minute hour day-of-month month day-of-week, e.g. "
    "`0 9 * * MON-FRI` or `*/15 * * * *`. Each field is `*`, a value, a range `a-b` "
    "(a <= b), or a comma list of them, each with an optional step `/n`; months and "
    "weekdays may be names (JAN-DEC, SUN-SAT; 0 and 7 are Sunday); day-of-month also "
    "takes `L` (last day) and `LW` (last weekday), day-of-week `5L` (last Friday) and "
    "`MON#2` (second Monday). A day of month that none of the months has is refused."
)
