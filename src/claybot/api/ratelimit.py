"""Request limits on sliding one-minute windows. Pure; the clock is an argument.

Per key: only allowed requests count, so a client that keeps knocking while limited
is let in again once its oldest allowed request leaves the window (the original
counted denied requests too, so a retrying client could lock itself out for good).

Per client address, failed authentications: each unknown key costs a key-store
lookup (908 a second were answered 401 on TCP), so past its limit a client is
refused before the lookup, and only failures count.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

WINDOW_S = 60.0
MAX_AUTH_FAILURES_PER_MIN = 20  # per client address; a person mistyping a key stays far below
MAX_TRACKED_CLIENTS = 10_000  # addresses with recent failures kept; the oldest go first


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


class FailureLimiter:
    """Failed authentications per client address, at most ``limit`` in any minute.

    ``retry_after`` is asked before a key is looked up and ``record_failure`` after
    an unknown key, so a refused client costs no lookup. Successes are not counted
    and do not reset the count: one valid key must not buy a guesser more tries.
    """

    def __init__(
        self,
        limit: int = MAX_AUTH_FAILURES_PER_MIN,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_TRACKED_CLIENTS,
    ) -> None:
        if limit < 1:
            raise ValueError(f"the failure limit must be at least 1, got {limit}")
        self.limit = limit
        self._clock = clock
        self._max_clients = max_clients
        # Only the newest ``limit`` failures matter: the oldest of them says when the
        # client may try again. Least recently failing clients first, for eviction.
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, client: str) -> int:
        """0 if ``client`` may try a key now, else the whole seconds until it may."""
        now = self._clock()
        failures = self._recent(client, now)
        if len(failures) < self.limit:
            return 0
        return max(1, math.ceil(WINDOW_S - (now - failures[0])))

    def record_failure(self, client: str) -> bool:
        """Count a failed attempt; True when it is the one that reaches the limit."""
        now = self._clock()
        failures = self._recent(client, now)
        if not failures:
            failures = self._failures[client] = deque(maxlen=self.limit)
            if len(self._failures) > self._max_clients:
                self._failures.popitem(last=False)
        else:
            self._failures.move_to_end(client)
        failures.append(now)
        return len(failures) == self.limit

    def _recent(self, client: str, now: float) -> deque[float]:
        """The client's failures still in the window; a client with none is forgotten."""
        failures = self._failures.get(client)
        if failures is None:
            return deque()
        while failures and now - failures[0] >= WINDOW_S:
            failures.popleft()
        if not failures:
            del self._failures[client]
        return failures
