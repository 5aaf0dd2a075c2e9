"""The side-task supervisor: restarts with back-off, a clean stop, an honest status."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from claybot.kernel.supervise import Supervisor

FAILED_AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


class RecordedPauses:
    """Stands in for ``asyncio.sleep``: notes each back-off pause and goes on at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay_s: float) -> None:
        self.delays.append(delay_s)
        await asyncio.sleep(0)


class FailingTask:
    """Raises on its first ``failures`` runs, then works until cancelled."""

    def __init__(self, failures: int, *, before_failing: Callable[[int], None] | None = None):
        self.failures = failures
        self.runs = 0
        self.working = asyncio.Event()
        self.cancelled = asyncio.Event()
        self._before_failing = before_failing

    async def __call__(self) -> None:
        self.runs += 1
        if self.runs <= self.failures:
            if self._before_failing is not None:
                self._before_failing(self.runs)
            raise RuntimeError(f"failure {self.runs}")
        self.working.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.cancelled.set()


async def test_a_failing_task_is_restarted_with_a_doubling_capped_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pauses = RecordedPauses()
    supervisor = Supervisor(sleep=pauses, now=lambda: FAILED_AT)
    task = FailingTask(failures=8)
    with caplog.at_level(logging.ERROR, logger="claybot.kernel.supervise"):
        supervisor.start("sweeper", task)
        await asyncio.wait_for(task.working.wait(), 5)
    assert pauses.delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    [status] = supervisor.status()
    assert status.to_dict() == {
        "name": "sweeper",
        "running": True,
        "restarts": 8,
        "lastError": "RuntimeError: failure 8",
        "lastFailureAt": "2030-01-02T03:04:05Z",
    }
    failures = [r for r in caplog.records if getattr(r, "action", None) == "side_task.failed"]
    assert len(failures) == 8
    assert failures[0].exc_info is not None  # the traceback is there to fix the cause
    assert "sweeper" in failures[0].getMessage()
    await supervisor.stop()


async def test_a_task_that_ran_for_a_while_restarts_after_the_shortest_pause() -> None:
    elapsed_s = 0.0

    def work(run: int) -> None:
        nonlocal elapsed_s
        if run == 3:  # runs 1, 2 and 4 fail at once; run 3 after a minute of work
            elapsed_s += 60.0

    pauses = RecordedPauses()
    supervisor = Supervisor(sleep=pauses, monotonic=lambda: elapsed_s, healthy_after_s=60.0)
    task = FailingTask(failures=4, before_failing=work)
    supervisor.start("flush", task)
    await asyncio.wait_for(task.working.wait(), 5)
    assert pauses.delays == [0.5, 1.0, 0.5, 1.0]
    await supervisor.stop()


async def test_stop_cancels_running_tasks_and_waits_for_them() -> None:
    supervisor = Supervisor()
    task = FailingTask(failures=0)
    supervisor.start("checkpoint", task)
    await asyncio.wait_for(task.working.wait(), 5)
    await supervisor.stop()
    assert task.cancelled.is_set()  # its cleanup ran before stop returned
    [status] = supervisor.status()
    assert (status.running, status.restarts, status.last_error) == (False, 0, None)


async def test_stop_ends_a_task_waiting_to_be_restarted() -> None:
    supervisor = Supervisor(first_delay_s=3600.0)
    task = FailingTask(failures=1)
    supervisor.start("sweeper", task)
    async with asyncio.timeout(5):
        while supervisor.status()[0].last_error is None:
            await asyncio.sleep(0.001)
        await supervisor.stop()  # does not wait out the hour
    [status] = supervisor.status()
    assert (status.running, status.restarts) == (False, 0)
    assert status.last_error == "RuntimeError: failure 1"
    assert task.runs == 1


async def test_a_task_that_returns_is_done_and_not_started_again() -> None:
    supervisor = Supervisor(sleep=RecordedPauses())
    runs: list[int] = []
    finished = asyncio.Event()

    async def once() -> None:
        runs.append(1)
        finished.set()

    supervisor.start("once", once)
    await asyncio.wait_for(finished.wait(), 5)
    await supervisor.stop()
    [status] = supervisor.status()
    assert (runs, status.running, status.restarts) == ([1], False, 0)


async def test_two_tasks_may_not_share_a_name() -> None:
    supervisor = Supervisor()
    supervisor.start("sweeper", FailingTask(failures=0))
    with pytest.raises(ValueError, match="'sweeper'"):
        supervisor.start("sweeper", FailingTask(failures=0))
    await supervisor.stop()
