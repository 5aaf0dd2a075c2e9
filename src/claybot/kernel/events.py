"""The engine event bus: ``{id, type, payload, timestamp}`` with increasing ids.

Ids start from the boot time in microseconds, so they keep increasing across
restarts and a client's ``Last-Event-ID`` from an earlier engine is simply older
than everything buffered now; within one engine they are consecutive.

Recent events sit in one bounded ring buffer, and that ring is also every
stream's queue: a subscriber is only a position in it. Emitting an event copies
nothing per subscriber; whoever serves the subscribers (``claybot.api.fanout``)
hears of it through a listener, and a reader takes everything after its position
at once, so a busy bus is written to each socket in few large writes. Each event
is encoded for SSE once, when it is emitted (orjson: about a microsecond), and the
ring keeps only that frame; readers at the same position share one joined copy of
what follows it (``SpanMemo``). A subscriber that falls a whole ring behind has
missed events it can no longer get: its stream ends (it reconnects with
Last-Event-ID and sees the gap), and a slow reader costs no memory meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import time
from array import array
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, cast, get_args

import orjson
from typing_extensions import TypedDict

from claybot.kernel.sse import sse_frame

DEFAULT_BUFFER_SIZE = 10_000

# Why a reader was ended for being slow: it fell a whole ring behind, or its stream
# stopped taking what was written to it (``claybot.api.sse``).
DropReason = Literal["overflowed", "stalled"]
DROP_REASONS: tuple[DropReason, ...] = get_args(DropReason)


class EventJson(TypedDict):
    """An event as the stream sends it (the ``data`` of its SSE frame)."""

    id: int
    type: str
    payload: dict[str, Any]  # the type's payload (``event_types``), or a plugin's own
    timestamp: str


class Event(NamedTuple):
    """One event. A named tuple: every emit makes one, listeners or not, and a frozen
    dataclass took three times as long to build."""

    id: int
    type: str
    payload: dict[str, Any]
    timestamp: str

    def to_dict(self) -> EventJson:
        return {
            "id": self.id,
            "type": self.type,
            "payload": self.payload,
            "timestamp": self.timestamp,
        }

    @property
    def sse_frame(self) -> bytes:
        """This event as one SSE frame: ``id``, ``event: message`` and the event as the
        ``data`` line (the seed API's wire format). JSON never holds a raw line break,
        so the data is a single line."""
        return encode_frame(self.id, self.to_dict())


def encode_frame(event_id: int, event: EventJson) -> bytes:
    try:
        data = orjson.dumps(event)
    except TypeError:  # a payload orjson cannot take (a huge int, a foreign type)
        data = json.dumps(event, default=str).encode()
    return sse_frame(data, event="message", id=event_id)


class UtcStamp:
    """Now, as ``datetime.now(UTC).isoformat()`` writes it with its microseconds and a
    ``Z``: an event's timestamp. The date and the time of day are formatted once a
    second, the rest is digits: a tenth of the 2 us datetime takes, on every emit."""

    __slots__ = ("_clock_ns", "_prefix", "_second")

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._clock_ns = clock_ns  # nanoseconds since the epoch
        self._second = -1
        self._prefix = ""

    def __call__(self) -> str:
        second, nanoseconds = divmod(self._clock_ns(), 1_000_000_000)
        if second != self._second:
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._prefix}.{nanoseconds // 1000:06d}Z"


def frame_id(frame: bytes) -> int:
    """The event id of a frame ``encode_frame`` made."""
    return int(frame[4 : frame.index(b"\r\n")])


def frame_event(frame: bytes) -> Event:
    """The event a frame holds, decoded again (replays and filters; rarely on a hot path)."""
    data = orjson.loads(frame[frame.index(b"data: ") + 6 : -4])
    return Event(int(data["id"]), str(data["type"]), data["payload"], str(data["timestamp"]))


CHUNK_BYTES = 64 * 1024
# (data, offsets, first index, last index) of the events a chunk holds for a read.
_Part = tuple["bytes | bytearray", "array[int]", int, int]
# Spans already taken in one pass over many readers, by the position they were taken
# after: (how many events, the joined frames). Readers at the same place share them.
SpanMemo = dict[int, tuple[int, bytes]]


@dataclass(frozen=True, slots=True)
class _Chunk:
    first_id: int
    data: bytes
    offsets: array[int]  # frame k is data[offsets[k]:offsets[k + 1]]

    @property
    def count(self) -> int:
        return len(self.offsets) - 1


class EventRing:
    """The SSE frames of the last ``size`` events, packed into chunks of ~64 KB.

    The ring is long-lived and refilled all the time. Kept as one object per event,
    its frames were made among everything else a load allocates, and each pinned
    the allocator's pool (and so its 1 MB arena) wherever it landed: after a load
    the engine stayed tens of MB above boot with every agent unloaded. Packed into
    few large buffers (outside the small-object allocator), with their offsets in
    arrays, the ring holds no small object per event; a chunk is freed whole once
    all its events are older than the ring. Ids are consecutive, so an event's
    place tells its id.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an event ring holds at least one event, not {size!r}")
        self._size = size
        self._chunks: list[_Chunk] = []  # sealed, oldest first
        self._open = bytearray()
        self._open_offsets = array("L", [0])
        self._open_first = 0
        self.first_id = 0  # the oldest id held (meaningless while empty)
        self.last_id = -1

    def __len__(self) -> int:
        return self.last_id - self.first_id + 1

    def append(self, event_id: int, frame: bytes) -> None:
        # On every emit: written out rather than through len(self) and properties.
        last = self.last_id
        if last < self.first_id:  # empty
            self._chunks.clear()
            self._open = bytearray()
            self._open_offsets = array("L", [0])
            self._open_first = self.first_id = event_id
        elif event_id != last + 1:
            raise ValueError(f"event {event_id!r} does not follow {last!r}")
        data = self._open
        data += frame
        self._open_offsets.append(len(data))
        self.last_id = event_id
        if len(data) >= CHUNK_BYTES:
            self._chunks.append(_Chunk(self._open_first, bytes(data), self._open_offsets))
            self._open = bytearray()
            self._open_offsets = array("L", [0])
            self._open_first = event_id + 1
        if event_id - self.first_id >= self._size:
            self.first_id = event_id - self._size + 1
            while self._chunks and self._chunks[0].first_id + self._chunks[0].count <= (
                self.first_id
            ):
                del self._chunks[0]

    def _parts(self, first: int, last: int) -> list[_Part]:
        """(data, offsets, from, to) of each chunk holding events ``first..last``."""
        parts: list[_Part] = []
        for chunk in self._chunks:
            end = chunk.first_id + chunk.count - 1
            if end < first:
                continue
            if chunk.first_id > last:
                return parts
            lo, hi = max(first, chunk.first_id), min(last, end)
            parts.append((chunk.data, chunk.offsets, lo - chunk.first_id, hi - chunk.first_id))
        if last >= self._open_first:
            lo = max(first, self._open_first) - self._open_first
            parts.append((self._open, self._open_offsets, lo, last - self._open_first))
        return parts

    def _bounds(self, event_id: int, limit: int) -> tuple[int, int]:
        first = max(event_id + 1, self.first_id)
        return first, min(self.last_id, first + limit - 1)

    def after(self, event_id: int, limit: int) -> list[bytes]:
        """Up to ``limit`` held frames of the events with ids above ``event_id``, oldest
        first; the first is that of ``max(event_id + 1, first_id)``."""
        first, last = self._bounds(event_id, limit)
        frames: list[bytes] = []
        for data, offsets, lo, hi in self._parts(first, last):
            frames += [bytes(data[offsets[k] : offsets[k + 1]]) for k in range(lo, hi + 1)]
        return frames

    def span(self, event_id: int, max_bytes: int) -> tuple[int, bytes]:
        """The frames of the events after ``event_id`` joined, as many as fit in
        ``max_bytes`` (at least one): (how many, the bytes). One copy and no object
        per event: what a stream writes."""
        first, last = self._bounds(event_id, self.last_id + 1)
        pieces: list[bytes | bytearray | memoryview] = []
        count = size = 0
        for data, offsets, lo, hi in self._parts(first, last):
            stop = lo
            while stop <= hi and (
                count == 0 or size + offsets[stop + 1] - offsets[lo] <= max_bytes
            ):
                stop += 1
                count += 1
            if stop > lo:
                start, end = offsets[lo], offsets[stop]
                # A sealed chunk is immutable: a view of it copies nothing until the join.
                pieces.append(
                    memoryview(data)[start:end] if isinstance(data, bytes) else data[start:end]
                )
                size += end - start
            if stop <= hi:
                break
        return count, b"".join(pieces)


@dataclass(eq=False)  # identity semantics: a subscription is one reader
class Subscription:
    """One reader's place in the bus: every event after ``position``, in order."""

    _bus: EventBus
    position: int  # the id of the last event this reader has taken
    replayed: int  # buffered events that were already there when it subscribed
    gap: bool  # the requested Last-Event-ID is older than the buffer: events were missed
    closed: bool = False
    overflowed: bool = False  # fell a whole buffer behind: the events it missed are gone
    _ended: asyncio.Future[None] | None = None

    @property
    def bus(self) -> EventBus:
        return self._bus

    @property
    def behind(self) -> bool:
        """Events after ``position`` exist."""
        return self.position < self._bus.last_id

    def take(self, limit: int) -> list[bytes]:
        """The frames of the next events (``limit`` at most), or none; closes on overflow."""
        if self.closed:
            return []
        ring = self._bus._ring
        if self.position < ring.first_id - 1:
            self.drop("overflowed")
            return []
        frames = ring.after(self.position, limit)
        self.position += len(frames)  # ids are consecutive, and none was skipped
        return frames

    def take_span(self, max_bytes: int, memo: SpanMemo | None = None) -> bytes:
        """The next frames joined, about ``max_bytes`` at most (one frame at least), or
        nothing; closes on overflow. With ``memo`` (one per pass over the readers, while
        no event is emitted), readers at the same position get the same bytes object:
        the frames are joined once, not once per reader."""
        if self.closed:
            return b""
        ring = self._bus._ring
        if self.position < ring.first_id - 1:
            self.drop("overflowed")
            return b""
        taken = memo.get(self.position) if memo is not None else None
        if taken is None:
            taken = ring.span(self.position, max_bytes)
            if memo is not None:
                memo[self.position] = taken
        count, data = taken
        self.position += count
        return data

    async def until_closed(self) -> None:
        """Until the subscription closes: its reader left, was dropped, or the bus is
        shutting down. (What it reads is written by whoever serves it, not awaited here:
        a reader waiting for each event was a task woken per event.)"""
        if self.closed:
            return
        if self._ended is None:
            self._ended = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._ended)  # one waiter cancelled cancels no other

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._bus._subscribers.discard(self)
            if self._ended is not None and not self._ended.done():
                self._ended.set_result(None)

    def drop(self, reason: DropReason) -> None:
        """End a reader that is too slow (counted in ``EventBus.readers_dropped``)."""
        if self.closed:
            return
        if reason == "overflowed":
            self.overflowed = True
        self._bus.readers_dropped[reason] += 1
        self.close()


class EventSink(Protocol):
    """Where a producer of events sends them: an ``EventBus``, or ``DiscardedEvents``."""

    def emit(self, type: str, payload: Mapping[str, Any] | None = None) -> object: ...


class DiscardedEvents:
    """An ``EventSink`` for events nobody can read: a job's turn loop emits the
    ``agent.*`` events of a conversation no stream shows (a job's progress is its log
    and its status), and an ``EventBus`` would encode and keep each one."""

    def emit(self, type: str, payload: Mapping[str, Any] | None = None) -> None:
        return None


class EventBus:
    def __init__(
        self,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        first_id: int | None = None,
        stamp: Callable[[], str] | None = None,
    ) -> None:
        self._ring = EventRing(buffer_size)
        self._subscribers: set[Subscription] = set()
        self._next_id = first_id if first_id is not None else time.time_ns() // 1000
        self._stamp = stamp or UtcStamp()  # each event's timestamp
        self._listeners: list[Callable[[Event], None]] = []
        self._closed = False  # close_subscriptions was called: no new readers
        # Readers ended for being too slow, since the bus began (the engine's metrics).
        self.readers_dropped: dict[DropReason, int] = dict.fromkeys(DROP_REASONS, 0)

    @property
    def last_id(self) -> int:
        return self._next_id - 1

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def emit(self, type: str, payload: Mapping[str, Any] | None = None) -> Event:
        event_id = self._next_id
        self._next_id = event_id + 1
        # A payload is a dict, mostly built as its ``event_types`` TypedDict (which mypy
        # takes only as a Mapping): a cast, not a copy, on every emit.
        body = cast("dict[str, Any]", payload) if payload else {}
        stamp = self._stamp()
        # Encoded once, here: every stream sends the same bytes, and the ring keeps them.
        frame: EventJson = {"id": event_id, "type": type, "payload": body, "timestamp": stamp}
        self._ring.append(event_id, encode_frame(event_id, frame))
        event = Event(event_id, type, body, stamp)
        for listener in self._listeners:
            listener(event)
        return event

    def add_listener(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """In-process synchronous listener (tests, connectors, the SSE fan-out), called
        on every emit: it must be quick. Returns a remover."""
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
        if self._closed:  # shutting down: a reader that (re)connects now ends at once
            subscription.closed = True
            return subscription
        self._subscribers.add(subscription)
        return subscription

    def close_subscriptions(self) -> None:
        """End every stream (shutdown): readers finish instead of waiting forever, and
        one that reconnects meanwhile is ended at once (the server waits for every
        request before it stops, and cancels what is left with a traceback)."""
        self._closed = True
        for subscriber in list(self._subscribers):
            subscriber.close()

    def recent(self, limit: int = 100) -> list[Event]:
        return [frame_event(frame) for frame in self._ring.after(self.last_id - limit, limit)]

    def newest_of(self, types: Collection[str], scanned: int, limit: int) -> list[Event]:
        """The newest ``limit`` events of ``types`` among the last ``scanned`` still in
        the buffer, newest first."""
        found = [event for event in self.recent(scanned) if event.type in types]
        return list(reversed(found[-limit:])) if limit > 0 else []
