"""One timer for many due times: sleep until the earliest, wake again when one changes.

Cron tasks, proactive agents and the heartbeat each keep due times by key (a task
id, an agent id, the one beat). ``run(on_due)`` sleeps until the earliest due time,
or until ``set`` / ``discard`` re-arms it, and then awaits ``on_due(now)``, which
takes what is due with ``take_due(now)``. Between two wakes nothing polls, so
10,000 idle tasks cost nothing.

Time is the clock's: ``Clock.sleep_until`` cuts long sleeps into slices, so a
wall clock stepped forward (suspend, NTP) is noticed within a minute, and one
stepped back makes the sleep longer, never a run early. The timer hands over the
due time and the time it woke; whether a late one still runs (misfire grace,
``run-once``, catching up) is each scheduler's own policy.

Due times sit in a heap with lazy deletion: ``set`` costs O(log n), an entry that
was moved or removed is dropped when it reaches the top, and the heap is rebuilt
when such stale entries outnumber the live ones.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

from claybot.kernel.clock import Clock

STALE_ENTRIES_KEPT = 64  # stale heap entries tolerated beyond the live ones before a rebuild


class DueTimer:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._due: dict[str, datetime] = {}
        self._heap: list[tuple[datetime, str]] = []  # may hold stale entries, see earliest()
        self._changed = asyncio.Event()

    def set(self, key: str, when: datetime | None) -> None:
        """Due at ``when`` (None: not due at all); the sleeping timer is re-armed."""
        if when is None:
            self.discard(key)
            return
        if self._due.get(key) == when:
            return
        self._due[key] = when
        heapq.heappush(self._heap, (when, key))
        self._changed.set()
        if len(self._heap) > 2 * len(self._due) + STALE_ENTRIES_KEPT:
            self._heap = [(due, due_key) for due_key, due in self._due.items()]
            heapq.heapify(self._heap)

    def discard(self, key: str) -> None:
        if self._due.pop(key, None) is not None:
            self._changed.set()

    def get(self, key: str) -> datetime | None:
        return self._due.get(key)

    def __len__(self) -> int:
        return len(self._due)

    def earliest(self) -> datetime | None:
        heap = self._heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # moved or removed since it was pushed
        return heap[0][0] if heap else None

    def take_due(self, now: datetime) -> Iterator[tuple[str, datetime]]:
        """(key, due time) of each entry due at ``now``, earliest first (ties by key).

        Each is removed as it is handed over, one at a time: a due time that the
        consumer moves or removes while it handles an earlier entry is not handed
        over in its old place.
        """
        while (earliest := self.earliest()) is not None and earliest <= now:
            when, key = heapq.heappop(self._heap)
            del self._due[key]
            yield key, when

    async def run(self, on_due: Callable[[datetime], Awaitable[None]]) -> None:
        """Forever: wait until something is due, then ``await on_due(now)``.

        ``on_due`` must take what is due (``take_due``) or set it again on purpose
        (a retry), or the timer calls it again at once. Its errors end the loop:
        handling them (log, retry later) is the scheduler's business.
        """
        while True:
            self._changed.clear()
            now = self._clock.now()
            earliest = self.earliest()
            if earliest is not None and earliest <= now:
                await on_due(now)
                continue  # it may have added or moved due times, and time went on
            await self._sleep(earliest)

    async def _sleep(self, until: datetime | None) -> None:
        """Until ``until`` or the next change, whichever comes first."""
        waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._changed.wait())]
        if until is not None:
            waiters.append(asyncio.ensure_future(self._clock.sleep_until(until)))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when the timer itself is cancelled: no waiter outlives it
            for waiter in waiters:
                waiter.cancel()
