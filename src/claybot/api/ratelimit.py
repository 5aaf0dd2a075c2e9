"""Request limits on sliding one-minute windows. Pure; the clock is an argument.

Per key: only allowed requests count, so a client that keeps knocking while limited
is let in again once its oldest allowed request leaves the window (the original
counted denied requests too, so a retrying client could lock itself out for good).

Per client address, failed authentications: past its limit a client's failures are
answered 429, and they keep counting, so a client that keeps failing stays limited.
Only failures are limited: a valid key from the same address (localhost, or a reverse
proxy every client comes through) is never refused for them (``claybot.api.key_check``).
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
    """Failed authentications per client address: ``limit`` in any minute are within it.

    A failure past the limit is counted too (a client that keeps failing stays limited)
    and only failures are: successes neither count nor reset the count, so one valid
    key buys a guesser no more tries.
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
        # client is back within its limit. Least recently failing clients first, for eviction.
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, client: str) -> int:
        """0 if ``client``'s next failure would be within its limit, else the whole
        seconds until it would be."""
        now = self._clock()
        return self._wait(self._recent(client, now), now)

    def record_failure(self, client: str) -> int:
        """Count a failed attempt: 0 if it was within the client's limit, else the whole
        seconds until the client's next failure would be (the Retry-After of a 429)."""
        now = self._clock()
        failures = self._recent(client, now)
        over = len(failures) >= self.limit
        if not failures:
            failures = self._failures[client] = deque(maxlen=self.limit)
            if len(self._failures) > self._max_clients:
                self._failures.popitem(last=False)
        else:
            self._failures.move_to_end(client)
        failures.append(now)
        return self._wait(failures, now) if over else 0

    def _wait(self, failures: deque[float], now: float) -> int:
        if len(failures) < self.limit:
            return 0
        return max(1, math.ceil(WINDOW_S - (now - failures[0])))

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
