"""The per-key sliding window, driven by a clock the test moves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from claybot.api.ratelimit import WINDOW_S, Decision, FailureLimiter, SlidingWindowLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_limit_per_minute_and_then_a_retry_time() -> None:
    clock = Clock()
    limiter = SlidingWindowLimiter(clock)
    assert [limiter.check("k", 3) for _ in range(3)] == [
        Decision(True, 0, 2),
        Decision(True, 0, 1),
        Decision(True, 0, 0),
    ]
    assert limiter.check("k", 3) == Decision(False, 60)
    clock.now += 20.2
    assert limiter.check("k", 3) == Decision(False, 40)  # ceil(39.8): never early


def test_the_window_slides_one_request_at_a_time() -> None:
    clock = Clock()
    limiter = SlidingWindowLimiter(clock)
    assert limiter.check("k", 2).allowed  # t=0
    clock.now += 30
    assert limiter.check("k", 2).allowed  # t=30
    clock.now += 29
    denied = limiter.check("k", 2)  # t=59: the first is still inside the window
    assert not denied.allowed and denied.retry_after_s == 1
    clock.now += 1
    assert limiter.check("k", 2).allowed  # t=60: the first left, its slot is free
    assert not limiter.check("k", 2).allowed  # t=60: the one from t=30 still counts


def test_denied_requests_do_not_extend_the_wait() -> None:
    clock = Clock()
    limiter = SlidingWindowLimiter(clock)
    assert limiter.check("k", 1).allowed
    for _ in range(50):  # a client hammering while limited
        clock.now += 1
        assert not limiter.check("k", 1).allowed
    clock.now += 10
    assert limiter.check("k", 1).allowed


def test_keys_are_limited_separately() -> None:
    limiter = SlidingWindowLimiter(Clock())
    assert limiter.check("a", 1).allowed
    assert not limiter.check("a", 1).allowed
    assert limiter.check("b", 1).allowed


def test_a_limit_of_zero_refuses_everything() -> None:
    limiter = SlidingWindowLimiter(Clock())
    assert limiter.check("k", 0) == Decision(False, int(WINDOW_S))
    assert limiter.check("k", -5) == Decision(False, int(WINDOW_S))


@given(
    limit=st.integers(min_value=1, max_value=20),
    gaps=st.lists(st.floats(min_value=0, max_value=30), min_size=1, max_size=120),
)
def test_no_minute_ever_holds_more_than_the_limit(limit: int, gaps: list[float]) -> None:
    clock = Clock()
    limiter = SlidingWindowLimiter(clock)
    allowed: list[float] = []
    for gap in gaps:
        clock.now += gap
        decision = limiter.check("k", limit)
        if decision.allowed:
            allowed.append(clock.now)
            recent = [t for t in allowed if clock.now - t < WINDOW_S]
            assert len(recent) <= limit
            assert decision.remaining == limit - len(recent)
        else:
            assert 1 <= decision.retry_after_s <= WINDOW_S
            # Waiting as told is enough.
            later = [t for t in allowed if clock.now + decision.retry_after_s - t < WINDOW_S]
            assert len(later) < limit


def test_failures_limit_a_client_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    limiter = FailureLimiter(2, clock)
    assert limiter.retry_after("a") == 0
    assert limiter.record_failure("a") == 0
    clock.now += 15
    assert limiter.record_failure("a") == 0  # the one that reaches the limit is within it
    assert limiter.retry_after("a") == 45  # the next is not
    assert limiter.retry_after("b") == 0
    clock.now += 44.5
    assert limiter.retry_after("a") == 1  # never early
    clock.now += 0.5
    assert limiter.retry_after("a") == 0


def test_failures_past_the_limit_count_so_a_client_that_keeps_failing_stays_limited() -> None:
    clock = Clock()
    limiter = FailureLimiter(2, clock)
    assert [limiter.record_failure("a") for _ in range(2)] == [0, 0]
    told = []
    for _ in range(10):  # one failure every 10 s, five times the limit's pace
        clock.now += 10
        told.append(limiter.record_failure("a"))
    assert told == [50] * 10  # each counted: the next would be over until 50 s later
    clock.now += 49
    assert limiter.retry_after("a") == 1
    clock.now += 1  # waiting as told is enough
    assert limiter.record_failure("a") == 0


def test_the_failure_limiter_forgets_quiet_clients_and_stays_bounded() -> None:
    clock = Clock()
    limiter = FailureLimiter(1, clock, max_clients=3)
    for client in ("a", "b", "c", "d"):  # "a" failed least recently: it is dropped
        limiter.record_failure(client)
    assert [limiter.retry_after(client) for client in "abcd"] == [0, 60, 60, 60]
    clock.now += WINDOW_S
    assert [limiter.retry_after(client) for client in "abcd"] == [0, 0, 0, 0]
    assert limiter.record_failure("a") == 0  # counted afresh
    assert limiter.retry_after("a") == 60
