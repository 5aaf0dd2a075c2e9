"""Writing a bus's events to its SSE streams: one sweep over the streams, in slices.

A stream used to be a task of its own, woken for each event, that took its frames and
awaited its write through the ASGI stack under two timeouts (its ping, its write).
With 200 readers that cost the engine about 42 us a write, mostly waking tasks and
arming timers rather than writing, and a write budget of 1,000 writes a second held
all streams of a bus together: the last of 200 readers got each event 200 ms late.

Here one sweep per bus writes to its streams, going round them from where it
stopped. Each visit writes everything the stream has not had yet in one write; the
frames after one position are joined once for all the readers there (``SpanMemo``);
and the write is the stream's ASGI ``send`` run in place: it returns without waiting
unless the reader's socket is full, so 200 writes cost about 2 ms (10 us a write on
this machine's 2 cores, of which the write system call is 7-8). The sweep stops once
every stream has been visited since the last event with nothing left to write.

It makes ``SLICE_WRITES`` writes at a time, then lets the loop run whatever else is
ready: a turn is not held up by all the writes of the last one's reply, and the
writes fill the time a turn waits for its disk. An event that comes while the sweep
is going round is picked up where it is: a stream the sweep has not reached yet takes
it with the one it was behind on, and no stream waits for a whole pass to end first.

On a busy engine the streams' share is bounded: when a cycle (every stream visited
once) took less than ``BUSY_CYCLE_SHARE`` of the time it lasted, other work filled
the rest, and the next cycle waits until the streams have taken no more than
``BUSY_SHARE`` of the engine's time; each write then carries everything that came
meanwhile. Measured with 200 readers: at light load a cycle's slices took 60-90 % of
the time it lasted, at full load 10-20 % (a cycle of 200 writes of some 60 KB each
took 9 ms); resting, the streams took 7-10 % of the engine's CPU at full load
instead of 14 %.

A write that has to wait is left pending and resumed when what it waits for is done,
as a task would resume it; its stream is passed over meanwhile, so a slow reader
delays nobody. A write pending for ``SEND_TIMEOUT_S`` drops its reader (it stopped
reading), and a stream that wrote nothing for its ``ping_s`` gets a ping: one timer a
bus checks both.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from starlette.types import Send

from claybot.kernel.events import Event, EventBus, SpanMemo, Subscription
from claybot.kernel.sse import sse_comment

log = logging.getLogger(__name__)

# A write pending this long means the reader stopped reading (its socket buffers,
# some hundreds of KB, are full): at 2,000 events/s it is dropped about 4,000
# events after it stalled, and reconnects with Last-Event-ID.
SEND_TIMEOUT_S = 2.0
TICK_S = 0.5  # how often stalled writes and quiet streams are looked for
# Bounds one write (a replay, a reader far behind, large events): the server may have
# to buffer a whole write for a slow reader. A stream with more to take after a full
# write is written again when the sweep comes round.
WRITE_BYTES = 256 * 1024
TAKE_EVENTS = 32  # events taken at a time while a filtered stream's write is filled
# Writes in one slice of the sweep (some 0.1 ms), and streams visited (most of them
# with nothing to write: a filtered stream's conversation was quiet).
SLICE_WRITES = 8
SLICE_VISITS = 256
# A cycle whose slices took less than this share of the time it lasted ran on a busy
# loop (other work took twice the streams' time); the next then rests until the
# streams have had BUSY_SHARE of the time, at most
# MAX_REST_S (a reader of a busy bus is written to at least every quarter second, far
# within the ring's 10,000 events).
BUSY_CYCLE_SHARE = 1 / 3
BUSY_SHARE = 0.05
MAX_REST_S = 0.25
PING = sse_comment("ping")


@dataclass
class _Cycle:
    """One time round the streams: when it began, what its slices took."""

    started: float = 0.0
    visits: int = 0
    busy_s: float = 0.0


@dataclass(eq=False)  # identity semantics: one stream
class StreamWriter:
    """One stream in the sweep: what it reads, how it writes, its pending write."""

    send: Send
    subscription: Subscription
    keep: Callable[[bytes], bool] | None  # which frames the stream shows (None: all)
    ping_s: float
    wrote_at: float  # the clock's time of its last write (a ping after ping_s without)
    pending: Generator[Any, None, None] | None = None  # a write waiting for the socket
    pending_since: float = 0.0
    stalled: bool = False  # dropped because a write waited SEND_TIMEOUT_S

    def take(self, memo: SpanMemo) -> bytes:
        """The bytes of its next write (about ``WRITE_BYTES`` at most), or nothing."""
        if self.keep is None:  # every frame: joined once for every reader at this place
            return self.subscription.take_span(WRITE_BYTES, memo)
        frames: list[bytes] = []
        size = 0
        while size < WRITE_BYTES:
            batch = self.subscription.take(TAKE_EVENTS)
            kept = [frame for frame in batch if self.keep(frame)]
            frames += kept
            size += sum(map(len, kept))
            if len(batch) < TAKE_EVENTS:
                break
        return b"".join(frames)


class FanOut:
    """The streams of one bus and the sweep that writes to them."""

    def __init__(self, bus: EventBus, *, clock: Callable[[], float] = time.monotonic) -> None:
        # No reference to the bus is kept: fan-outs are looked up by bus in a weak map.
        self._writers: list[StreamWriter] = []
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next = 0  # the index of the stream the sweep visits next
        self._to_visit = 0  # visits before the sweep stops: each stream once since the news
        self._sweeping = False  # a slice of the sweep is scheduled
        self._memo: SpanMemo = {}  # the spans taken since the last event, by position
        self._cycle = _Cycle()
        self._ticker: asyncio.TimerHandle | None = None
        # The sweep and resumed writes run in a context of their own, not in that of
        # whichever turn emitted the event that started them.
        self._context = contextvars.Context()
        bus.add_listener(self._heard)

    def attach(
        self,
        send: Send,
        subscription: Subscription,
        keep: Callable[[bytes], bool] | None,
        ping_s: float,
    ) -> StreamWriter:
        """Serve ``subscription`` to ``send`` from now on (what it replays goes out at
        once, without waiting for an event)."""
        self._loop = asyncio.get_running_loop()
        writer = StreamWriter(send, subscription, keep, ping_s, self._clock())
        self._writers.append(writer)
        if self._ticker is None:
            self._ticker = self._loop.call_later(TICK_S, self._tick, context=self._context)
        self._news()
        return writer

    def detach(self, writer: StreamWriter) -> None:
        """Stop serving ``writer``; a write of its still pending is abandoned (it waited
        before writing anything). Safe to call twice."""
        if writer in self._writers:
            if self._writers.index(writer) < self._next:
                self._next -= 1
            self._writers.remove(writer)
        self._abandon(writer)
        if not self._writers and self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    def _heard(self, event: Event) -> None:
        if self._writers:
            self._memo = {}  # the spans taken so far end before this event
            self._news()

    def _news(self) -> None:
        """Something may be due to every stream: the sweep goes round once more."""
        self._to_visit = len(self._writers)
        if not self._sweeping and self._loop is not None:
            self._sweeping = True
            self._loop.call_soon(self._sweep, context=self._context)

    def _sweep(self) -> None:
        """One slice: up to ``SLICE_WRITES`` writes, then what else is ready runs."""
        writers, now = self._writers, self._clock()
        cycle = self._cycle
        if cycle.visits == 0:
            cycle.started = now
        written = visited = 0
        while writers and self._to_visit > 0 and written < SLICE_WRITES and visited < SLICE_VISITS:
            if self._next >= len(writers):
                self._next = 0
            writer = writers[self._next]
            self._next += 1
            self._to_visit -= 1
            visited += 1
            if writer.pending is not None or writer.subscription.closed:
                continue  # a write of its is waiting for its socket
            try:
                data = writer.take(self._memo)
            except Exception:  # its filter failed: that stream ends, the others go on
                log.exception(
                    "an event stream could not take its events and was ended",
                    extra={"action": "events.stream_failed"},
                )
                writer.subscription.close()
                continue
            if data:
                self._write(writer, data, now)
                written += 1
                if writer.pending is None and writer.subscription.behind:
                    self._to_visit = len(writers)  # its write was full: round again
        ended = self._clock()
        cycle.visits += visited
        cycle.busy_s += ended - now
        rest_s = 0.0
        if cycle.visits >= len(writers):  # every stream visited: a cycle ended
            lasted_s = ended - cycle.started
            if cycle.busy_s < BUSY_CYCLE_SHARE * lasted_s:  # the loop was busy
                rest_s = min(MAX_REST_S, cycle.busy_s * (1 / BUSY_SHARE - 1))
            self._cycle = _Cycle()
        assert self._loop is not None
        if not (self._to_visit > 0 and writers):
            self._sweeping = False
            self._memo = {}
            self._cycle = _Cycle()  # the next sweep, after a quiet spell, starts one
        elif rest_s:
            self._loop.call_later(rest_s, self._sweep, context=self._context)
        else:
            self._loop.call_soon(self._sweep, context=self._context)

    def _write(self, writer: StreamWriter, data: bytes, now: float) -> None:
        message = {"type": "http.response.body", "body": data, "more_body": True}
        writer.wrote_at = now
        self._run(writer, writer.send(message).__await__())

    def _resume(self, writer: StreamWriter, steps: Generator[Any, None, None]) -> None:
        if writer.pending is steps:  # else it was abandoned meanwhile
            self._run(writer, steps)

    def _run(self, writer: StreamWriter, steps: Generator[Any, None, None]) -> None:
        """Run a write on until it waits or ends, as a task would step it: when it waits
        for a future (the socket's buffers are full), it goes on once that is done."""
        try:
            waits_for = steps.send(None)
        except StopIteration:
            if writer.pending is not None:  # it had waited: what came meanwhile is due
                writer.pending = None
                if writer.subscription.behind:
                    self._news()
            return
        except (Exception, asyncio.CancelledError) as exc:
            writer.pending = None
            if not isinstance(exc, asyncio.CancelledError):
                log.warning(
                    "a write to an event stream failed; the stream was ended",
                    exc_info=exc,
                    extra={"action": "events.stream_failed"},
                )
            writer.subscription.close()
            return
        assert self._loop is not None
        if writer.pending is None:
            writer.pending = steps
            writer.pending_since = self._clock()
        if asyncio.isfuture(waits_for):
            waits_for._asyncio_future_blocking = False
            waits_for.add_done_callback(
                lambda _: self._resume(writer, steps), context=self._context
            )
        elif waits_for is None:  # a bare yield: on at the next turn of the loop
            self._loop.call_soon(self._resume, writer, steps, context=self._context)
        else:  # what a task refuses as well
            log.error(
                "a write to an event stream waited for %r, not a future; the stream was ended",
                waits_for,
                extra={"action": "events.stream_failed"},
            )
            self._abandon(writer)
            writer.subscription.close()

    def _abandon(self, writer: StreamWriter) -> None:
        if writer.pending is not None:
            pending, writer.pending = writer.pending, None
            pending.close()

    def _tick(self) -> None:
        """Drop the readers whose write waited too long; ping the quiet streams."""
        assert self._loop is not None
        now = self._clock()
        for writer in list(self._writers):
            if writer.subscription.closed:
                continue
            if writer.pending is not None:
                if now - writer.pending_since >= SEND_TIMEOUT_S:
                    writer.stalled = True
                    self._abandon(writer)
                    writer.subscription.drop("stalled")
            elif now - writer.wrote_at >= writer.ping_s:
                self._write(writer, PING, now)
        self._ticker = self._loop.call_later(TICK_S, self._tick, context=self._context)


_fan_outs: weakref.WeakKeyDictionary[EventBus, FanOut] = weakref.WeakKeyDictionary()


def fan_out_of(bus: EventBus, clock: Callable[[], float] = time.monotonic) -> FanOut:
    """The fan-out that serves the streams of ``bus``; ``clock`` is the one it measures
    its cycles with, if this call makes it (the bus's first stream)."""
    fan_out = _fan_outs.get(bus)
    if fan_out is None:
        fan_out = _fan_outs[bus] = FanOut(bus, clock=clock)
    return fan_out
