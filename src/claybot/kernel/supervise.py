"""Side tasks that must keep running: a task that raises is logged and started again.

A background loop (the idle sweeper, the state flush, the journal checkpoint) that
let an exception escape used to end silently, and what it did simply stopped
happening until the next restart. Here every side task runs under a supervisor:
a crash is logged with its traceback and the task is started again after a
back-off (0.5 s doubling to 30 s, so a task that fails at once every time costs a
log line per half minute, not a busy loop). A task that ran for a minute before it
failed counts as healthy again and restarts after the shortest delay. The status
says, per task, whether it runs, how often it was restarted and what last went
wrong, for ``GET /v1/engine/status``.

A task that returns has finished its work and is not started again; stopping the
supervisor cancels every task and waits for each to end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from typing_extensions import TypedDict

from claybot.kernel.backoff import Backoff

log = logging.getLogger(__name__)

FIRST_RESTART_DELAY_S = 0.5
MAX_RESTART_DELAY_S = 30.0
HEALTHY_AFTER_S = 60.0  # a run this long before failing resets the back-off

SideTask = Callable[[], Awaitable[None]]


class SideTaskJson(TypedDict):
    """A side task's status as ``GET /v1/engine/status`` lists it."""

    name: str
    running: bool
    restarts: int
    lastError: str | None
    lastFailureAt: str | None  # ISO 8601, UTC, with a ``Z``


@dataclass(frozen=True)
class SideTaskStatus:
    name: str
    running: bool
    restarts: int
    last_error: str | None
    last_failure_at: datetime | None

    def to_dict(self) -> SideTaskJson:
        failed_at = self.last_failure_at
        return {
            "name": self.name,
            "running": self.running,
            "restarts": self.restarts,
            "lastError": self.last_error,
            "lastFailureAt": failed_at.isoformat().replace("+00:00", "Z") if failed_at else None,
        }


@dataclass
class _Supervised:
    name: str
    run: SideTask
    task: asyncio.Task[None] | None = None
    running: bool = False
    restarts: int = 0
    last_error: str | None = None
    last_failure_at: datetime | None = None


class Supervisor:
    """Runs named side tasks and starts a failed one again after a growing pause."""

    def __init__(
        self,
        *,
        first_delay_s: float = FIRST_RESTART_DELAY_S,
        max_delay_s: float = MAX_RESTART_DELAY_S,
        healthy_after_s: float = HEALTHY_AFTER_S,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._first_delay_s = first_delay_s
        self._max_delay_s = max_delay_s
        self._healthy_after_s = healthy_after_s
        self._monotonic = monotonic
        self._now = now
        self._sleep = sleep
        self._tasks: dict[str, _Supervised] = {}

    def start(self, name: str, run: SideTask) -> None:
        """Run ``run()`` as the side task ``name`` until it returns or the supervisor stops."""
        if name in self._tasks:
            raise ValueError(f"a side task named {name!r} is already supervised")
        supervised = _Supervised(name, run)
        supervised.task = asyncio.create_task(self._keep_running(supervised), name=name)
        self._tasks[name] = supervised

    async def stop(self) -> None:
        """Cancel every side task and wait until each has ended."""
        tasks = [s.task for s in self._tasks.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def status(self) -> list[SideTaskStatus]:
        return [
            SideTaskStatus(s.name, s.running, s.restarts, s.last_error, s.last_failure_at)
            for s in self._tasks.values()
        ]

    async def _keep_running(self, supervised: _Supervised) -> None:
        backoff = Backoff(self._first_delay_s, self._max_delay_s)
        while True:
            started = self._monotonic()
            supervised.running = True
            try:
                await supervised.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = exc
            else:
                return  # its work is done
            finally:
                supervised.running = False
            if self._monotonic() - started >= self._healthy_after_s:
                backoff.reset()  # it had been working: this is not a repeat of one failure
            delay_s = backoff.next_s()
            supervised.last_error = f"{type(failure).__name__}: {failure}"
            supervised.last_failure_at = self._now()
            log.error(
                "side task %s failed (%s); starting it again in %g s",
                supervised.name,
                supervised.last_error,
                delay_s,
                exc_info=failure,
                extra={
                    "action": "side_task.failed",
                    "task": supervised.name,
                    "restarts": supervised.restarts,
                    "restartInS": delay_s,
                },
            )
            del failure  # the traceback holds the task's frames: not kept through the pause
            await self._sleep(delay_s)
            supervised.restarts += 1
