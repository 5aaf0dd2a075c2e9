"""The engine event bus: ``{id, type, payload, timestamp}`` with increasing ids.

Ids start from the boot time in microseconds, so they keep increasing across
restarts and a client's ``Last-Event-ID`` from an earlier engine is simply older
than everything buffered now; within one engine they are consecutive.

Recent events sit in one bounded ring buffer, and that ring is also every
stream's queue: a subscriber is only a position in it. Emitting an event copies
nothing per subscriber (it wakes the streams waiting for news, once however many
events follow), and a stream takes everything after its position at once, so a
busy bus is written to each socket in few large writes. Each event is encoded
for SSE once, by the first stream that sends it. A subscriber that falls a whole
ring behind has missed events it can no longer get: its stream ends (it
reconnects with Last-Event-ID and sees the gap), and a slow reader costs no
memory meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

DEFAULT_BUFFER_SIZE = 10_000


@dataclass(frozen=True, slots=True)  # slots: the ring holds 10,000 of them
class Event:
    id: int
    type: str
    payload: dict[str, Any]
    timestamp: str
    _frame: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "payload": self.payload,
            "timestamp": self.timestamp,
        }

    @property
    def sse_frame(self) -> bytes:
        """This event as one SSE frame, encoded once however many streams send it.

        Byte for byte what sse-starlette makes of ``{"id": str(id), "event":
        "message", "data": json.dumps(event)}`` (the seed API's wire format):
        ``json.dumps`` escapes every line break, so the data is a single line.
        Encoded on first use: with no stream open, no event is ever encoded.
        """
        frame = self._frame
        if frame is None:
            data = json.dumps(self.to_dict()).encode()
            frame = b"id: %d\r\nevent: message\r\ndata: %b\r\n\r\n" % (self.id, data)
            object.__setattr__(self, "_frame", frame)  # a cache: the event itself is frozen
        return frame


class EventRing:
    """The last ``size`` events, found by id in constant time (ids are consecutive)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an event ring holds at least one event, not {size!r}")
        self._size = size
        self._slots: list[Event] = []
        self._base = 0  # the id that sits in slot 0 once the ring has wrapped
        self.first_id = 0  # the oldest id held (meaningless while empty)
        self.last_id = -1

    def __len__(self) -> int:
        return len(self._slots)

    def append(self, event: Event) -> None:
        if not self._slots:
            self._base = self.first_id = event.id
        elif event.id != self.last_id + 1:
            raise ValueError(f"event {event.id!r} does not follow {self.last_id!r}")
        if len(self._slots) < self._size:
            self._slots.append(event)
        else:
            self._slots[(event.id - self._base) % self._size] = event
            self.first_id += 1
        self.last_id = event.id

    def after(self, event_id: int, limit: int) -> list[Event]:
        """Up to ``limit`` held events with ids above ``event_id``, oldest first."""
        first = max(event_id + 1, self.first_id)
        last = min(self.last_id, first + limit - 1)
        if not self._slots or last < first:
            return []
        start = (first - self._base) % self._size
        end = (last - self._base) % self._size
        if start <= end:
            return self._slots[start : end + 1]
        return self._slots[start:] + self._slots[: end + 1]


@dataclass(eq=False)  # identity semantics: a subscription is one reader
class Subscription:
    """One reader's place in the bus: every event after ``position``, in order."""

    _bus: EventBus
    position: int  # the id of the last event this reader has taken
    replayed: int  # buffered events that were already there when it subscribed
    gap: bool  # the requested Last-Event-ID is older than the buffer: events were missed
    closed: bool = False
    overflowed: bool = False  # fell a whole buffer behind: the events it missed are gone
    _wakeup: asyncio.Future[None] | None = None

    @property
    def bus(self) -> EventBus:
        return self._bus

    def take(self, limit: int) -> list[Event]:
        """The next events (``limit`` at most), or none; closes on overflow."""
        if self.closed:
            return []
        ring = self._bus._ring
        if self.position < ring.first_id - 1:
            self.overflowed = True
            self.close()
            return []
        events = ring.after(self.position, limit)
        if events:
            self.position = events[-1].id
        return events

    async def wait(self) -> None:
        """Until an event after ``position`` exists, or the subscription closes."""
        if self.closed or self._bus.last_id > self.position:
            return
        # A future of its own, not one shared by every reader: a reader that goes
        # away cancels only its own wait.
        self._wakeup = wakeup = asyncio.get_running_loop().create_future()
        self._bus._waiting.append(self)
        try:
            await wakeup
        finally:
            self._wakeup = None
            if wakeup.cancelled() or self.closed:
                # Not woken by an emit, which takes every waiter off the list: a reader
                # that leaves an idle bus must not stay listed until the next event.
                with contextlib.suppress(ValueError):
                    self._bus._waiting.remove(self)

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._bus._subscribers.discard(self)
            self._wake()

    async def batches(self, limit: int) -> AsyncIterator[list[Event]]:
        """Everything after ``position`` as it comes, in lists of at most ``limit``."""
        while True:
            events = self.take(limit)
            if events:
                yield events
                continue
            if self.closed:
                return
            await self.wait()


class EventBus:
    def __init__(
        self,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        first_id: int | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._ring = EventRing(buffer_size)
        self._subscribers: set[Subscription] = set()
        self._waiting: list[Subscription] = []
        self._next_id = first_id if first_id is not None else time.time_ns() // 1000
        self._now = now
        self._listeners: list[Callable[[Event], None]] = []

    @property
    def last_id(self) -> int:
        return self._next_id - 1

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def emit(self, type: str, payload: dict[str, Any] | None = None) -> Event:
        event = Event(
            id=self._next_id,
            type=type,
            payload=payload or {},
            timestamp=self._now().isoformat().replace("+00:00", "Z"),
        )
        self._next_id += 1
        self._ring.append(event)
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            for subscriber in waiting:
                subscriber._wake()
        for listener in self._listeners:
            listener(event)
        return event

    def add_listener(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """In-process synchronous listener (tests, connectors). Returns a remover."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def subscribe(self, last_event_id: int | None = None) -> Subscription:
        """A reader of every event after ``last_event_id`` (default: from now on).

        A Last-Event-ID ahead of the bus (another engine's) reads from now on.
        """
        position = self.last_id
        gap = False
        if last_event_id is not None and last_event_id < position:
            oldest = self._ring.first_id if len(self._ring) else self._next_id
            gap = last_event_id < oldest - 1
            position = max(last_event_id, oldest - 1)
        subscription = Subscription(self, position, self.last_id - position, gap)
        self._subscribers.add(subscription)
        return subscription

    def close_subscriptions(self) -> None:
        """End every stream (shutdown): readers finish instead of waiting forever."""
        for subscriber in list(self._subscribers):
            subscriber.close()

    def recent(self, limit: int = 100) -> list[Event]:
        return self._ring.after(self.last_id - limit, limit)
