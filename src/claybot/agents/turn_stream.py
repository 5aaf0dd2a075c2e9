"""What a turn shows while the model writes: text deltas and provider fall-throughs.

Deltas are live only (``agent.delta`` events); the durable record stays the final
message, written and delivered exactly once by the turn loop. Pieces are coalesced so
a fast stream costs a few events a second per turn, not one per token, while the
first piece goes out at once (what the user waits for).
"""

from __future__ import annotations

import asyncio
import time

from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventSink

# The most often one turn emits a delta; a fast model writes 50-100 tokens a second.
DELTA_INTERVAL_S = 0.04


class TurnStream:
    """The observer of one inference call of a turn (``CallObserver``)."""

    __slots__ = (
        "_agent_id",
        "_events",
        "_last",
        "_message_id",
        "_outgoing_id",
        "_pending",
        "_timer",
    )

    def __init__(self, events: EventSink, agent_id: str, message_id: str, outgoing_id: str) -> None:
        self._events = events
        self._agent_id = agent_id
        self._message_id = message_id
        self._outgoing_id = outgoing_id  # the id the final text will carry
        self._pending: list[str] = []
        self._last = 0.0  # when a delta last went out (monotonic)
        self._timer: asyncio.TimerHandle | None = None

    def delta(self, text: str) -> None:
        if not text:
            return
        self._pending.append(text)
        if self._timer is not None:
            return  # already due
        wait = self._last + DELTA_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self.flush()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self.flush)

    def flush(self) -> None:
        """Send what is pending as one delta (also at the end of the call)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._last = time.monotonic()
        self._events.emit(
            EventType.AGENT_DELTA,
            {
                "agentId": self._agent_id,
                "messageId": self._message_id,
                "outgoingId": self._outgoing_id,
                "text": text,
            },
        )

    def fallback(self, failed: str, next_provider: str, reason: str) -> None:
        # What the failed provider wrote is void: drop what was not sent, and tell
        # clients (who drop what was) before the next provider's first delta.
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
        self._events.emit(
            EventType.PROVIDER_FALLBACK,
            {
                "from": failed,
                "to": next_provider,
                "reason": reason,
                "agentId": self._agent_id,
                "messageId": self._message_id,
            },
        )
