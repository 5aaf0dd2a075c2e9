"""Growing pauses between retries: every retry loop in the engine takes its pauses here.

A pause starts at ``first_s`` and is ``multiplier`` times the last one, up to ``max_s``;
a success resets it. Pure: the caller sleeps (or waits on something else, with the
pause as its timeout), so a test reads the pauses without sleeping.

Not tenacity: the loops here do not call one function until it succeeds. They wait on
an event or a timeout, log each failure their own way, and reset on progress that is
not a return value (a batch written, an update handled).
"""

from __future__ import annotations

# Past this many doublings any pause is at its cap; the exponent stops there, so a
# long run of failures cannot overflow a float.
_MAX_EXPONENT = 64


def backoff_s(attempt: int, *, first_s: float, max_s: float, multiplier: float = 2.0) -> float:
    """The pause before retry ``attempt`` (0 for the first) of a run of failures."""
    return min(max_s, first_s * multiplier ** min(max(attempt, 0), _MAX_EXPONENT))


class Backoff:
    """The pauses of one run of failures: ``next_s()`` gives each, ``reset()`` ends the run."""

    def __init__(
        self, first_s: float, max_s: float, *, multiplier: float = 2.0, attempt: int = 0
    ) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.multiplier = multiplier
        self.attempt = attempt  # pauses taken in this run

    def next_s(self) -> float:
        """The pause to take now; the next one is longer, up to ``max_s``."""
        pause = backoff_s(
            self.attempt, first_s=self.first_s, max_s=self.max_s, multiplier=self.multiplier
        )
        self.attempt += 1
        return pause

    def reset(self) -> None:
        """A success: the next failure waits ``first_s`` again."""
        self.attempt = 0
