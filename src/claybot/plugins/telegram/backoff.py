"""Growing pauses between retries (pure apart from the injected sleep)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class Backoff:
    """Sleeps that double from ``first_s`` up to ``max_s``: never a tight retry loop."""

    def __init__(
        self, sleep: Callable[[float], Awaitable[None]], first_s: float, max_s: float
    ) -> None:
        self._sleep = sleep
        self._first_s = first_s
        self._max_s = max_s
        self._delay_s = first_s

    async def wait(self) -> None:
        await self._sleep(self._delay_s)
        self._delay_s = min(self._delay_s * 2, self._max_s)

    def reset(self) -> None:
        self._delay_s = self._first_s
