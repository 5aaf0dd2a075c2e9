"""What the router tells about each provider call: which provider, how long, whether it
failed. The engine plugs in its metrics (``claybot.engine.metrics``); anything else
(a ``claybot worker``, a test) gets ``UNMETERED``, which keeps nothing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class CallMeter(Protocol):
    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        """One call to one provider ended (``failed``: it raised, and the router moves on)."""
        ...


class _Unmetered:
    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        pass


UNMETERED: CallMeter = _Unmetered()


async def metered(meter: CallMeter, provider_id: str, call: Awaitable[T]) -> T:
    """Await one provider's call and tell ``meter`` how it went. A cancelled call (a
    stopped turn, a shutdown) is not a provider's doing: it is not reported."""
    started = time.perf_counter()
    try:
        result = await call
    except Exception:
        meter.provider_called(provider_id, time.perf_counter() - started, failed=True)
        raise
    meter.provider_called(provider_id, time.perf_counter() - started, failed=False)
    return result
