"""The due-timer that cron, heartbeat and proactive agents sleep on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from claybot.kernel import clock as clock_module
from claybot.kernel.clock import SystemClock
from claybot.scheduling.due_timer import DueTimer
from tests.cron.fake_clock import FakeClock

T = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


class Handler:
    """Takes everything due at each wake and notes (now, [(key, due)])."""

    def __init__(self, timer: DueTimer) -> None:
        self.timer = timer
        self.wakes: list[tuple[datetime, list[tuple[str, datetime]]]] = []

    async def __call__(self, now: datetime) -> None:
        self.wakes.append((now, list(self.timer.take_due(now))))

    async def wakes_at_least(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.wakes) < count:
                await asyncio.sleep(0.001)


async def armed_for(clock: FakeClock, *deadlines: datetime) -> None:
    """Until the timer sleeps until exactly ``deadlines`` (none: only for a change)."""
    async with asyncio.timeout(5):
        while sorted(deadline for deadline, _ in clock._sleepers) != sorted(deadlines):
            await asyncio.sleep(0.001)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T)


@pytest.fixture
async def running(clock: FakeClock) -> AsyncIterator[tuple[DueTimer, Handler]]:
    timer = DueTimer(clock)
    handler = Handler(timer)
    task = asyncio.create_task(timer.run(handler))
    yield timer, handler
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_it_sleeps_until_the_earliest_and_hands_over_in_time_order(
    clock: FakeClock, running: tuple[DueTimer, Handler]
) -> None:
    timer, handler = running
    timer.set("late", at(10))
    timer.set("b", at(5))
    timer.set("a", at(5))
    await armed_for(clock, at(5))
    clock.set(at(7))
    await handler.wakes_at_least(1)
    assert handler.wakes == [(at(7), [("a", at(5)), ("b", at(5))])]
    await armed_for(clock, at(10))
    assert (timer.get("a"), timer.get("late"), len(timer)) == (None, at(10), 1)


async def test_adding_moving_and_removing_re_arm_it(
    clock: FakeClock, running: tuple[DueTimer, Handler]
) -> None:
    timer, handler = running
    await armed_for(clock)  # nothing due: it waits for a change only
    timer.set("x", at(60))
    await armed_for(clock, at(60))
    timer.set("y", at(30))
    await armed_for(clock, at(30))
    timer.set("y", at(90))
    await armed_for(clock, at(60))
    timer.discard("x")
    await armed_for(clock, at(90))
    timer.set("y", None)
    await armed_for(clock)
    assert handler.wakes == []


async def test_a_time_already_past_is_handed_over_at_once_with_its_due_time(
    clock: FakeClock, running: tuple[DueTimer, Handler]
) -> None:
    timer, handler = running
    timer.set("missed", at(-3600))  # the engine was down: what to do is the scheduler's call
    await handler.wakes_at_least(1)
    assert handler.wakes == [(T, [("missed", at(-3600))])]


async def test_a_wall_clock_jump_hands_over_everything_passed_in_one_wake(
    clock: FakeClock, running: tuple[DueTimer, Handler]
) -> None:
    timer, handler = running
    for minute in (3, 1, 2):
        timer.set(f"m{minute}", at(60 * minute))
    await armed_for(clock, at(60))
    clock.set(at(3600))  # suspend, resume an hour later
    await handler.wakes_at_least(1)
    assert handler.wakes == [(at(3600), [("m1", at(60)), ("m2", at(120)), ("m3", at(180))])]


async def test_a_wall_clock_step_back_delays_the_wake(
    clock: FakeClock, running: tuple[DueTimer, Handler]
) -> None:
    timer, handler = running
    timer.set("a", at(60))
    await armed_for(clock, at(60))
    clock.set(at(-3600))
    clock.set(at(59))
    timer.set("marker", at(59))  # handed over alone: "a" is not due yet
    await handler.wakes_at_least(1)
    assert handler.wakes == [(at(59), [("marker", at(59))])]
    await armed_for(clock, at(60))


async def test_an_entry_the_consumer_moves_or_removes_meanwhile_is_not_handed_over(
    clock: FakeClock,
) -> None:
    timer = DueTimer(clock)
    handed: list[str] = []

    async def on_due(now: datetime) -> None:
        for key, _ in timer.take_due(now):
            handed.append(key)
            if key == "a":
                timer.set("b", at(60))  # moved before its turn came
                timer.discard("c")

    for key in ("a", "b", "c", "d"):
        timer.set(key, at(0))
    task = asyncio.create_task(timer.run(on_due))
    try:
        await armed_for(clock, at(60))
        assert handed == ["a", "d"]
        assert timer.get("b") == at(60)
        assert timer.get("c") is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_consumer_that_sets_its_next_time_is_woken_again(clock: FakeClock) -> None:
    timer = DueTimer(clock)
    beats: list[datetime] = []

    async def beat(now: datetime) -> None:
        for key, due in timer.take_due(now):
            beats.append(due)
            timer.set(key, due + timedelta(minutes=30))

    timer.set("beat", T)
    task = asyncio.create_task(timer.run(beat))
    try:
        await armed_for(clock, at(1800))
        clock.set(at(1800))
        await armed_for(clock, at(3600))
        assert beats == [T, at(1800)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_key_moved_many_times_is_due_once_at_its_last_time(
    clock: FakeClock, running: tuple[DueTimer, Handler]
) -> None:
    timer, handler = running
    for second in range(1, 10_001):
        timer.set("edited", at(second))
    timer.set("edited", at(5))
    assert len(timer._heap) < 1000  # stale entries do not pile up
    await armed_for(clock, at(5))
    clock.set(at(20_000))
    await handler.wakes_at_least(1)
    assert handler.wakes == [(at(20_000), [("edited", at(5))])]


async def test_cancelling_it_leaves_no_sleeper_behind(clock: FakeClock) -> None:
    timer = DueTimer(clock)
    timer.set("a", at(60))
    task = asyncio.create_task(timer.run(Handler(timer)))
    await armed_for(clock, at(60))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock._sleepers == []


class SteppableClock(SystemClock):
    """The real clock's sliced sleep, on a wall clock the test can step."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return super().now() + self.offset


async def test_on_the_system_clock_a_forward_step_is_noticed_within_a_slice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clock_module, "MAX_SLEEP_S", 0.02)
    clock = SteppableClock()
    timer = DueTimer(clock)
    handler = Handler(timer)
    due = clock.now() + timedelta(hours=1)
    timer.set("hourly", due)
    task = asyncio.create_task(timer.run(handler))
    try:
        clock.offset = timedelta(hours=1, seconds=1)  # an NTP step or a resume from suspend
        await handler.wakes_at_least(1)
        assert handler.wakes[0][1] == [("hourly", due)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
