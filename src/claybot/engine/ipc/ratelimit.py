"""Per-key request limits: a sliding one-minute window. Pure; the clock is an argument.

Only allowed requests count: a client that keeps knocking while limited is let in
again once its oldest allowed request leaves the window (the original counted
denied requests too, so a retrying client could lock itself out for good).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

WINDOW_S = 60.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0  # whole seconds, at least 1 when denied (the Retry-After header)
    remaining: int = 0  # requests still allowed in the current window


class RateLimiter(Protocol):
    def check(self, key_id: str, limit_rpm: int) -> Decision: ...


class SlidingWindowLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}

    def check(self, key_id: str, limit_rpm: int) -> Decision:
        """Count one request for ``key_id`` if it fits in ``limit_rpm`` per minute."""
        now = self._clock()
        hits = self._hits.setdefault(key_id, deque())
        while hits and now - hits[0] >= WINDOW_S:
            hits.popleft()
        if limit_rpm <= 0:  # a key limited to nothing: no slot will ever free up
            return Decision(False, math.ceil(WINDOW_S))
        if len(hits) >= limit_rpm:
            # The oldest hit leaving the window frees the next slot.
            return Decision(False, max(1, math.ceil(WINDOW_S - (now - hits[0]))))
        hits.append(now)
        return Decision(True, 0, limit_rpm - len(hits))
