"""Event streams over SSE: many readers, each event encoded once, slow readers dropped.

A stream sends its init frame, then everything its subscription holds in as few
writes as it can: every frame already waiting goes out joined in one write (one
ASGI send, one syscall) instead of one per event. With 200 readers of a busy bus
the per-reader cost is per write, not per event, and the writes are paced so
that their number does not grow with the readers (``WRITES_PER_S``).

A reader that stops reading fills its socket buffers; the next write then waits,
and after ``SEND_TIMEOUT_S`` the stream is dropped (logged as
``events.reader_dropped``) and the connection closed. Nothing is queued for it
in the meantime: a subscription is a position in the bus's ring, so a stalled
reader costs the engine its socket buffers and no more.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from sse_starlette.sse import EventSourceResponse, SendTimeoutError
from starlette.types import Receive, Scope, Send

from claybot.kernel.events import Subscription

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
# the engine 50-100 us whatever its size (sse-starlette's send timeout, the ASGI
# layers, uvicorn, the syscall), so this keeps the fan-out near a tenth of a core
# however many readers there are; the price is latency: 200 ms with 200 readers.
WRITES_PER_S = 1_000


class EventStream(EventSourceResponse):
    """sse-starlette's response with a send timeout, whose timeout is a logged drop."""

    def __init__(self, content: AsyncIterator[dict[str, Any] | bytes], *, ping_s: float) -> None:
        super().__init__(content, ping=ping_s, send_timeout=SEND_TIMEOUT_S)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            # The response cannot be finished (that write would wait as well): the
            # server closes the connection, and the reader sees the stream end.
            log.warning(
                "an event stream stopped reading and was dropped; it may reconnect",
                extra={
                    "action": "events.reader_dropped",
                    "path": scope.get("path"),
                    "sendTimeoutS": SEND_TIMEOUT_S,
                },
            )


async def event_frames(
    init: dict[str, Any],
    subscription: Subscription,
    keep: Callable[[bytes], bool] | None = None,
) -> AsyncIterator[dict[str, Any] | bytes]:
    """The init frame, then the subscription's events (the frames ``keep`` accepts).

    After each write a stream rests ``readers / WRITES_PER_S`` before it looks
    again: one reader waits 1 ms, each of 200 readers 200 ms, and gets
    everything that came meanwhile in its next write. A stream that has been
    quiet that long writes an event as soon as it comes; one catching up (a full
    write) does not rest.
    """
    try:
        yield {"event": "message", "data": json.dumps(init)}
        while True:
            await subscription.wait()
            frames, behind = _next_write(subscription, keep)
            if frames:
                yield b"".join(frames)
                if not behind:
                    await asyncio.sleep(subscription.bus.subscriber_count / WRITES_PER_S)
            elif subscription.closed:
                break
        if subscription.overflowed:
            log.warning(
                "an event stream fell a whole buffer behind and was ended; it may reconnect",
                extra={"action": "events.reader_overflowed"},
            )
    finally:
        subscription.close()


def _next_write(
    subscription: Subscription, keep: Callable[[bytes], bool] | None
) -> tuple[list[bytes], bool]:
    """The frames of one write, and whether the reader is still behind after it."""
    if keep is None:  # every frame: the ring hands them over already joined
        data = subscription.take_span(WRITE_BYTES)
        return ([data] if data else []), subscription.position < subscription.bus.last_id
    frames: list[bytes] = []
    size = 0
    while size < WRITE_BYTES:
        batch = subscription.take(TAKE_EVENTS)
        chunk = [frame for frame in batch if keep(frame)]
        frames += chunk
        size += sum(map(len, chunk))
        if len(batch) < TAKE_EVENTS:
            return frames, False
    return frames, True
