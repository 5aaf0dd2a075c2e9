"""The one back-off every retry loop takes its pauses from."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from claybot.kernel.backoff import Backoff, backoff_s


def test_pauses_double_from_the_first_up_to_the_cap_and_a_reset_starts_over() -> None:
    backoff = Backoff(0.5, 30.0)
    assert [backoff.next_s() for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    backoff.reset()
    assert [backoff.next_s() for _ in range(2)] == [0.5, 1]


def test_a_run_of_failures_can_be_taken_up_where_it_is() -> None:
    backoff = Backoff(0.1, 30.0, attempt=3)
    assert [backoff.next_s() for _ in range(2)] == [0.1 * 8, 0.1 * 16]
    assert backoff_s(3, first_s=0.1, max_s=30.0) == 0.1 * 8


@given(
    first_s=st.floats(0.001, 10.0),
    max_s=st.floats(0.001, 100.0),
    multiplier=st.sampled_from([1.5, 2.0, 3.0]),
    count=st.integers(1, 200),
)
def test_each_pause_is_the_last_one_grown_and_capped(
    first_s: float, max_s: float, multiplier: float, count: int
) -> None:
    """What the loops wrote by hand (``delay = min(max, delay * 2)``), for long runs too."""
    backoff = Backoff(first_s, max_s, multiplier=multiplier)
    pauses = [backoff.next_s() for _ in range(count)]
    assert pauses[0] == min(max_s, first_s)
    for before, after in itertools.pairwise(pauses):
        assert after <= max_s and (after == max_s or after >= before * multiplier * (1 - 1e-12))
