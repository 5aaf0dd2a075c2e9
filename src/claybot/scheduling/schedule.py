"""5-field cron expressions evaluated in an IANA time zone (pure: no clock, no I/O).

The calendar math is cronsim's, which follows Debian cron with ``zoneinfo``:
a fixed local time that does not exist (spring forward) runs once, right after
the jump; one that exists twice (fall back) runs once, at its first occurrence;
a job that runs every few minutes keeps running through both. Instants are
handled as aware UTC datetimes everywhere else, so a scheduled run is identified
by one unambiguous instant.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from claybot.kernel.clock import UnknownTimeZone, zone
from claybot.kernel.errors import InvalidInput

MAX_EXPRESSION_CHARS = 256
FIELD_COUNT = 5

# The language as API documents state it: in words, under a format name, with cronsim
# (``CronSchedule.parse``) the only judge. A regular expression exact about it took 200
# lines and still could not say one rule across fields (a day no month has).
CRON_FORMAT = "cron"
CRON_DESCRIPTION = (
    "A 5-field cron expression: minute hour day-of-month month day-of-week, e.g. "
    "`0 9 * * MON-FRI` or `*/15 * * * *`. Each field is `*`, a value, a range `a-b` "
    "(a <= b), or a comma list of them, each with an optional step `/n`; months and "
    "weekdays may be names (JAN-DEC, SUN-SAT; 0 and 7 are Sunday); day-of-month also "
    "takes `L` (last day) and `LW` (last weekday), day-of-week `5L` (last Friday) and "
    "`MON#2` (second Monday). A day of month that none of the months has is refused. "
    "A refused expression is answered 422, naming the field and what is wrong with it."
)
CRON_EXAMPLES = ("0 9 * * MON-FRI", "*/15 * * * *", "0 0 L * *")


ScheduleField = Literal["schedule", "timezone"]


class ScheduleError(InvalidInput, ValueError):
    """A schedule or time zone that cannot be used, with the reason; ``field`` says which."""

    def __init__(self, message: str, *, field: ScheduleField = "schedule") -> None:
        super().__init__(message, field=field)


def parse_zone(name: str) -> ZoneInfo:
    try:
        return zone(name)
    except UnknownTimeZone as exc:
        raise ScheduleError(str(exc), field="timezone") from exc


@dataclass(frozen=True)
class CronSchedule:
    expression: str
    timezone: str
    zone: ZoneInfo = field(compare=False, repr=False)

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> CronSchedule:
        text = " ".join(expression.split())
        if not text or len(text) > MAX_EXPRESSION_CHARS:
            raise ScheduleError("the schedule is empty or too long")
        if len(text.split(" ")) != FIELD_COUNT:
            raise ScheduleError(
                f"{expression!r} must have 5 fields: minute hour day-of-month month day-of-week"
            )
        zone = parse_zone(timezone)
        try:
            CronSim(text, datetime(2000, 1, 1, tzinfo=zone))
        except CronSimError as exc:
            raise ScheduleError(f"{expression!r}: {exc}") from exc
        return cls(text, timezone, zone)

    def _iterate(self, after: datetime) -> Iterator[datetime]:
        start = after.astimezone(self.zone).replace(microsecond=0)
        for moment in CronSim(self.expression, start):
            yield moment.astimezone(UTC)

    def next_after(self, after: datetime) -> datetime | None:
        """The first scheduled instant strictly after ``after`` (aware), in UTC."""
        for moment in self._iterate(after):
            if moment > after:
                return moment
        return None  # pragma: no cover - cronsim iterates forever for valid input

    def next_runs(self, after: datetime, count: int) -> list[datetime]:
        """The first ``count`` scheduled instants strictly after ``after``, oldest first."""
        found: list[datetime] = []
        for moment in self._iterate(after):
            if len(found) >= count:
                break
            if moment > after:
                found.append(moment)
        return found

    def between(self, after: datetime, until: datetime, limit: int = 1000) -> list[datetime]:
        """Scheduled instants in (after, until], at most ``limit`` of them, oldest first."""
        found: list[datetime] = []
        for moment in self._iterate(after):
            if moment <= after:
                continue
            if moment > until or len(found) >= limit:
                break
            found.append(moment)
        return found
