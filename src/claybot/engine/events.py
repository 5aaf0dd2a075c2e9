"""The engine event bus: ``{id, type, payload, timestamp}`` with increasing ids.

Ids start from the boot time in microseconds, so they keep increasing across
restarts and a client's ``Last-Event-ID`` from an earlier engine is simply older
than everything buffered now. Recent events sit in a bounded ring buffer for
replay; each subscriber has a bounded queue, and a subscriber that falls that far
behind is dropped (it reconnects with Last-Event-ID) instead of growing memory.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

DEFAULT_BUFFER_SIZE = 10_000
SUBSCRIBER_QUEUE_SIZE = 10_000


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    payload: dict[str, Any]
    timestamp: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "payload": self.payload,
            "timestamp": self.timestamp,
        }


@dataclass(eq=False)  # identity semantics: subscriptions live in a set
class Subscription:
    """Events after a point: replayed ones first, then live ones."""

    replay: list[Event]
    gap: bool  # the requested Last-Event-ID is older than the buffer: events were missed
    _queue: asyncio.Queue[Event | None] = field(
        default_factory=lambda: asyncio.Queue(SUBSCRIBER_QUEUE_SIZE)
    )
    _close: Callable[[Subscription], None] | None = None
    overflowed: bool = False

    def _push(self, event: Event) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            self.close()

    def close(self) -> None:
        if self._close is not None:
            self._close(self)
            self._close = None
            # Wake a reader blocked on get(); drop one event if the queue is full.
            if self._queue.full():
                self._queue.get_nowait()
            self._queue.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[Event]:
        for event in self.replay:
            yield event
        while True:
            item = await self._queue.get()
            if item is None:
                return
            yield item


class EventBus:
    def __init__(
        self,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        first_id: int | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._buffer: deque[Event] = deque(maxlen=buffer_size)
        self._subscribers: set[Subscription] = set()
        self._next_id = first_id if first_id is not None else time.time_ns() // 1000
        self._now = now
        self._listeners: list[Callable[[Event], None]] = []

    @property
    def last_id(self) -> int:
        return self._next_id - 1

    def emit(self, type: str, payload: dict[str, Any] | None = None) -> Event:
        event = Event(
            id=self._next_id,
            type=type,
            payload=payload or {},
            timestamp=self._now().isoformat().replace("+00:00", "Z"),
        )
        self._next_id += 1
        self._buffer.append(event)
        for subscriber in list(self._subscribers):
            subscriber._push(event)
        for listener in self._listeners:
            listener(event)
        return event

    def add_listener(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """In-process synchronous listener (tests, connectors). Returns a remover."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def subscribe(self, last_event_id: int | None = None) -> Subscription:
        replay: list[Event] = []
        gap = False
        if last_event_id is not None:
            replay = [event for event in self._buffer if event.id > last_event_id]
            oldest = self._buffer[0].id if self._buffer else self._next_id
            gap = last_event_id < oldest - 1
        subscription = Subscription(replay=replay, gap=gap, _close=self._subscribers.discard)
        self._subscribers.add(subscription)
        return subscription

    def close_subscriptions(self) -> None:
        """End every stream (shutdown): readers finish instead of waiting forever."""
        for subscriber in list(self._subscribers):
            subscriber.close()

    def recent(self, limit: int = 100) -> list[Event]:
        return list(self._buffer)[-limit:]
