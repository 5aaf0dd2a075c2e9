"""What the router tells about each provider call: which provider, how long, whether it
failed. The engine plugs in its metrics (``claybot.engine.metrics``); anything else
(a ``claybot worker``, a test) gets ``UNMETERED``, which keeps nothing.
"""

from __future__ import annotations

from typing import Protocol


class CallMeter(Protocol):
    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        """One call to one provider ended (``failed``: it raised, and the router moves on)."""
        ...


class _Unmetered:
    def provider_called(self, provider_id: str, seconds: float, *, failed: bool) -> None:
        pass


UNMETERED: CallMeter = _Unmetered()
