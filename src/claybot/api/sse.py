"""Event streams over SSE: many readers, each event encoded once, slow readers dropped.

A stream sends its init frame, then everything its subscription holds in as few
writes as it can: every frame already waiting goes out joined in one write (one
ASGI send, one syscall) instead of one per event. With 200 readers of a busy bus
the per-reader cost is per write, not per event, and all streams of a bus share
a budget of writes per second (``WRITES_PER_S``), so that their number does not
grow with the readers. A quiet bus leaves the budget unspent and a stream writes
an event the moment it comes; a busy one makes each stream wait its turn, and
what came meanwhile goes out in that turn's one write.

A reader that stops reading fills its socket buffers; the next write then waits,
and after ``SEND_TIMEOUT_S`` the stream is dropped (logged as
``events.reader_dropped``, counted in the bus's ``readers_dropped``) and the
connection closed. Nothing is queued for it in the meantime: a subscription is a
position in the bus's ring, so a stalled reader costs the engine its socket
buffers and no more.

The response is plain ASGI rather than sse-starlette's: a stream is its request's
own task plus one that waits for the client to leave (which closes the
subscription, and so ends the stream). sse-starlette runs four tasks in an anyio
task group for each reader; with hundreds of idle dashboards those objects were
most of a reader's memory, and what outlived them kept the engine's RSS up after
the readers left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from claybot.kernel.events import EventBus, Subscription

log = logging.getLogger(__name__)

# A write that waits this long means the reader stopped reading (its socket buffers,
# some hundreds of KB, are full): at 2,000 events/s it is dropped about 4,000
# events after it stalled, and reconnects with Last-Event-ID.
SEND_TIMEOUT_S = 2.0
# Bounds one write (a replay, a reader far behind, large events): the server may have
# to buffer a whole write for a slow reader. A paced stream writes what came while it
# rested (200 readers, 1,000 events/s: about 80 KB); a full write means it is behind,
# and it then writes without resting until it has caught up.
WRITE_BYTES = 256 * 1024
TAKE_EVENTS = 32  # events taken at a time while a write is filled
# What all streams together may write per second while the bus is busy. A write costs
# the engine 50-100 us whatever its size (the ASGI layers, uvicorn, the syscall), so
# this keeps the fan-out near a tenth of a core however many readers there are; the
# price is latency under load: 200 ms with 200 readers of a busy bus.
WRITES_PER_S = 1_000
# Writes the budget lets through at once after a quiet spell: a turn's few events
# reach a handful of readers without waiting for their turn.
WRITE_BURST = 50
PING = b": ping\r\n\r\n"  # a comment line: keeps proxies from closing a quiet stream
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each write on, do not buffer
]


class _ReaderStalled(Exception):
    pass


class WriteBudget:
    """The writes every stream of one bus may make together: ``rate`` a second, with
    up to ``burst`` at once when the budget was not used for a while (a generic cell
    rate algorithm: one number, the time the budget is spent up to)."""

    def __init__(
        self,
        rate: float = WRITES_PER_S,
        burst: int = WRITE_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = 1 / rate
        self._tolerance = (burst - 1) * self._interval
        self._clock = clock
        self._spent_until = 0.0  # the clock's time up to which the budget is taken

    def reserve(self) -> float:
        """Take one write; the seconds to wait before making it (0: at once)."""
        now = self._clock()
        spent_until = max(self._spent_until, now)
        self._spent_until = spent_until + self._interval
        return max(0.0, spent_until - now - self._tolerance)


_budgets: weakref.WeakKeyDictionary[EventBus, WriteBudget] = weakref.WeakKeyDictionary()


def budget_of(bus: EventBus) -> WriteBudget:
    """The write budget the streams of ``bus`` share."""
    budget = _budgets.get(bus)
    if budget is None:
        budget = _budgets[bus] = WriteBudget()
    return budget


class EventStream(Response):
    """The init frame, then the subscription's events (the frames ``keep`` accepts),
    a ping after ``ping_s`` of quiet, until the reader leaves, stalls or falls a
    whole buffer behind."""

    media_type = "text/event-stream"

    def __init__(
        self,
        init: dict[str, Any],
        subscription: Subscription,
        keep: Callable[[bytes], bool] | None = None,
        *,
        ping_s: float,
    ) -> None:
        # Response's own fields, for anything that looks at a response before it runs.
        self.status_code = 200
        self.background = None
        self.body = b""
        self.raw_headers = list(HEADERS)
        self._init = init
        self._subscription = subscription
        self._keep = keep
        self._ping_s = ping_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        subscription = self._subscription
        watcher = asyncio.create_task(_close_when_gone(receive, subscription))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            init = json.dumps(self._init).encode()
            await _write(send, b"event: message\r\ndata: %b\r\n\r\n" % init)
            await self._stream(send)
            if subscription.overflowed:
                log.warning(
                    "an event stream fell a whole buffer behind and was ended; it may reconnect",
                    extra={"action": "events.reader_overflowed"},
                )
            if not watcher.done():  # the reader is still there: end the response cleanly
                await _write(send, b"", more_body=False)
        except _ReaderStalled:
            # The response cannot be finished (that write would wait as well): the
            # server closes the connection, and the reader sees the stream end.
            subscription.drop("stalled")
            log.warning(
                "an event stream stopped reading and was dropped; it may reconnect",
                extra={
                    "action": "events.reader_dropped",
                    "path": scope.get("path"),
                    "sendTimeoutS": SEND_TIMEOUT_S,
                },
            )
        finally:
            subscription.close()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _stream(self, send: Send) -> None:
        """Each write takes its turn in the bus's write budget, and carries everything
        that came while it waited: on a quiet bus at once, with each of 200 readers of
        a busy bus about 200 ms apart. A stream catching up (a full write) writes again
        without waiting; one whose filter kept nothing takes no turn."""
        subscription = self._subscription
        budget = budget_of(subscription.bus)
        while True:
            try:
                async with asyncio.timeout(self._ping_s):
                    await subscription.wait()
            except TimeoutError:
                await _write(send, PING)
                continue
            frames, behind = _next_write(subscription, self._keep, WRITE_BYTES)
            if not frames:
                if subscription.closed:
                    return
                continue
            if not behind and (wait := budget.reserve()):
                await asyncio.sleep(wait)
                room = WRITE_BYTES - sum(map(len, frames))
                more, behind = _next_write(subscription, self._keep, room)
                frames += more
            await _write(send, b"".join(frames))


async def _write(send: Send, data: bytes, *, more_body: bool = True) -> None:
    try:
        async with asyncio.timeout(SEND_TIMEOUT_S):
            await send({"type": "http.response.body", "body": data, "more_body": more_body})
    except TimeoutError as exc:
        raise _ReaderStalled from exc


async def _close_when_gone(receive: Receive, subscription: Subscription) -> None:
    """Closes the subscription (which ends the stream) when the client disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass
    subscription.close()


def _next_write(
    subscription: Subscription, keep: Callable[[bytes], bool] | None, limit: int
) -> tuple[list[bytes], bool]:
    """The frames of one write of about ``limit`` bytes at most, and whether the
    reader is still behind after it."""
    if keep is None:  # every frame: the ring hands them over already joined
        data = subscription.take_span(limit)
        return ([data] if data else []), subscription.position < subscription.bus.last_id
    frames: list[bytes] = []
    size = 0
    while size < limit:
        batch = subscription.take(TAKE_EVENTS)
        chunk = [frame for frame in batch if keep(frame)]
        frames += chunk
        size += sum(map(len, chunk))
        if len(batch) < TAKE_EVENTS:
            return frames, False
    return frames, True
