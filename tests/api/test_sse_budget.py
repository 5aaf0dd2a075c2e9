"""The write budget every event stream of a bus shares (api/sse.py).

A quiet bus must not delay anybody (a turn's reply reaches its one reader at
once); a busy one holds all streams together to the budget's rate, each waiting
its turn. The clock is a fake, handed to the budget.
"""

from __future__ import annotations

import pytest

from claybot.api.sse import WriteBudget


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_a_quiet_bus_writes_at_once(clock: FakeClock) -> None:
    budget = WriteBudget(rate=1_000, burst=50, clock=clock)
    for _ in range(200):  # one write every 2 ms: half the rate
        assert budget.reserve() == 0.0
        clock.now += 0.002


def test_a_burst_goes_at_once_and_the_rest_waits_its_turn(clock: FakeClock) -> None:
    budget = WriteBudget(rate=1_000, burst=50, clock=clock)
    waits = [budget.reserve() for _ in range(200)]  # 200 readers woken by one event
    assert waits[:50] == [0.0] * 50
    # Then one write a millisecond: the 200th waits 150 ms.
    assert waits[50:] == pytest.approx([n / 1_000 for n in range(1, 151)])


def test_the_budget_refills_while_unused_but_no_more_than_a_burst(clock: FakeClock) -> None:
    budget = WriteBudget(rate=1_000, burst=50, clock=clock)
    for _ in range(100):
        budget.reserve()
    clock.now += 10.0  # a quiet spell far longer than the backlog
    waits = [budget.reserve() for _ in range(60)]
    assert waits[:50] == [0.0] * 50
    assert waits[50:] == pytest.approx([n / 1_000 for n in range(1, 11)])
