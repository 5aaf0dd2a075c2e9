"""A clock the test moves by hand; sleepers wake when it passes their deadline."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self._now = start
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, when: datetime) -> None:
        if when <= self._now:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (when, future)
        self._sleepers.append(entry)
        try:
            await future
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def set(self, when: datetime) -> None:
        self._now = when
        for deadline, future in list(self._sleepers):
            if deadline <= when and not future.done():
                future.set_result(None)

    def advance(self, delta: timedelta) -> None:
        self.set(self._now + delta)
