"""``{type, data}`` messages for the proactive agents' WebSocket clients.

Each client has a bounded queue; a client that falls that far behind is dropped
(it reconnects and reads the state again) rather than growing the engine's memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

CLIENT_QUEUE_SIZE = 2048

Message = dict[str, Any]


class Listener:
    def __init__(self, hub: Broadcaster) -> None:
        self._hub = hub
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue(CLIENT_QUEUE_SIZE)
        self.overflowed = False
        self.closed = False

    def push(self, message: Message) -> None:
        try:
            self._queue.put_nowait(message)
        except asyncio.QueueFull:
            self.overflowed = True
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._hub._listeners.discard(self)
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def next(self) -> Message | None:
        """The next message, or None once the listener is closed."""
        message = await self._queue.get()
        if message is None:
            self._queue.put_nowait(None)  # closed for good: every later call says so too
        return message

    async def __aiter__(self) -> AsyncIterator[Message]:
        while (message := await self.next()) is not None:
            yield message


class Broadcaster:
    def __init__(self) -> None:
        self._listeners: set[Listener] = set()
        self._closed = False

    def listen(self) -> Listener:
        listener = Listener(self)
        self._listeners.add(listener)
        if self._closed:  # shutting down: the client is told at once instead of waiting
            listener.close()
        return listener

    def publish(self, type: str, data: Mapping[str, Any]) -> None:
        message = {"type": type, "data": data}
        for listener in list(self._listeners):
            listener.push(message)

    def close(self) -> None:
        self._closed = True
        for listener in list(self._listeners):
            listener.close()

    @property
    def listener_count(self) -> int:
        return len(self._listeners)
