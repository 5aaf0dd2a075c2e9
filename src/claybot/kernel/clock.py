"""The wall clock the schedulers read and sleep on; tests substitute a controllable one."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from claybot.kernel.errors import InvalidInput

# Long sleeps are cut into slices so a wall-clock jump (suspend, NTP step) is
# noticed within a minute instead of after the whole monotonic delay.
MAX_SLEEP_S = 60.0


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC."""
        ...

    async def sleep_until(self, when: datetime) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        while True:
            delay = (when - self.now()).total_seconds()
            if delay <= 0:
                return
            await asyncio.sleep(min(delay, MAX_SLEEP_S))


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class UnknownTimeZone(InvalidInput, ValueError):
    """A name that is not an IANA time zone this machine knows."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="timezone")


def zone(name: str) -> ZoneInfo:
    if not name or len(name) > 64 or name.startswith("/") or ".." in name:
        raise UnknownTimeZone(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimeZone(
            f"unknown time zone {name!r}; use an IANA name such as Europe/Paris"
        ) from exc
