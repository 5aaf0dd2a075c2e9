"""Event streams over SSE: many readers, each event encoded once, slow readers dropped.

A stream sends its init frame, then everything its subscription holds: what it
replays, then each event as it comes. The writes are the bus's fan-out's
(``claybot.api.fanout``): a sweep over the streams of the bus writes what each has
not had yet, every frame already waiting joined in one write (one ASGI send, one
syscall), and the frames after one position joined once for all the readers there.

A reader that stops reading fills its socket buffers; a write then waits, and after
``SEND_TIMEOUT_S`` the stream is dropped (logged as ``events.reader_dropped``,
counted in the bus's ``readers_dropped``) and the connection closed. Nothing is
queued for it in the meantime: a subscription is a position in the bus's ring, so a
stalled reader costs the engine its socket buffers and no more, and the others'
writes go on without it.

The response is plain ASGI rather than sse-starlette's: a stream is its request's
own task, which waits for the stream to end, plus one that waits for the client to
leave (which closes the subscription, and so ends the stream). sse-starlette runs
four tasks in an anyio task group for each reader; with hundreds of idle dashboards
those objects were most of a reader's memory, and what outlived them kept the
engine's RSS up after the readers left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from claybot.api.fanout import SEND_TIMEOUT_S, StreamWriter, fan_out_of
from claybot.kernel.errors import ClayError
from claybot.kernel.events import Subscription
from claybot.kernel.sse import sse_frame

log = logging.getLogger(__name__)

SSE_PING_S = 15  # a quiet stream's ping: proxies and browsers keep it open

HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each write on, do not buffer
]


class _ReaderStalled(Exception):
    pass


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
        fan_out = fan_out_of(subscription.bus)
        writer: StreamWriter | None = None
        watcher = asyncio.create_task(_close_when_gone(receive, subscription))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            init = json.dumps(self._init).encode()
            await _write(send, sse_frame(init, event="message"))
            writer = fan_out.attach(send, subscription, self._keep, self._ping_s)
            await subscription.until_closed()
            fan_out.detach(writer)  # before the last write: no round writes after it
            if writer.stalled:
                raise _ReaderStalled
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
            if writer is not None:
                fan_out.detach(writer)
            subscription.close()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


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


def resume_after(last_event_id: str | None, since: int | None = None) -> int | None:
    """The event id a reconnecting stream resumes after (the header wins over ``since``)."""
    if last_event_id is None:
        return since
    try:
        return int(last_event_id)
    except ValueError as exc:
        raise ClayError(
            "Last-Event-ID must be an integer", code="invalid_request", field="Last-Event-ID"
        ) from exc
