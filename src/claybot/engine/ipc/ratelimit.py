"""Per-key request limits: a sliding one-minute window. Pure; the clock is an argument."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 60.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0


class SlidingWindowLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}

    def check(self, key_id: str, limit_rpm: int) -> Decision:
        now = self._clock()
        hits = self._hits.setdefault(key_id, deque())
        while hits and now - hits[0] >= WINDOW_S:
            hits.popleft()
        if len(hits) >= limit_rpm:
            # The oldest hit leaving the window frees the next slot.
            return Decision(False, max(1, math.ceil(WINDOW_S - (now - hits[0]))))
        hits.append(now)
        return Decision(True)
