"""One task that sleeps until the earliest due key, then hands it to a callback.

No polling: the task wakes when the earliest instant arrives (the clock slices
long sleeps so a wall-clock jump is noticed) or when a due time changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from claybot.kernel.clock import Clock

log = logging.getLogger(__name__)


class DueTimer:
    def __init__(self, clock: Clock, on_due: Callable[[str, datetime], None]) -> None:
        self._clock = clock
        self._on_due = on_due
        self._due: dict[str, datetime] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def set(self, key: str, when: datetime | None) -> None:
        if when is None:
            self._due.pop(key, None)
        else:
            self._due[key] = when
        self._changed.set()

    def get(self, key: str) -> datetime | None:
        return self._due.get(key)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="proactive-timer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _fire_due(self) -> None:
        now = self._clock.now()
        for when, key in sorted((w, k) for k, w in self._due.items() if w <= now):
            if self._due.get(key) != when:
                continue  # changed by an earlier callback of this round
            del self._due[key]
            try:
                self._on_due(key, when)
            except Exception:
                log.exception(
                    "a due callback failed", extra={"action": "proactive.timer_error", "key": key}
                )

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            self._fire_due()
            if self._changed.is_set():
                continue  # a callback moved a due time: look again before sleeping
            earliest = min(self._due.values(), default=None)
            changed = asyncio.ensure_future(self._changed.wait())
            waiters: list[asyncio.Future[Any]] = [changed]
            if earliest is not None:
                waiters.append(asyncio.ensure_future(self._clock.sleep_until(earliest)))
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
