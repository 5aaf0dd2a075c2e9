"""The event bus: the ring every stream reads from, subscriptions as positions in it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sse_starlette.event import ServerSentEvent

from claybot.kernel.events import (
    Event,
    EventBus,
    EventRing,
    SpanMemo,
    UtcStamp,
    frame_event,
    frame_id,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def split_frames(span: bytes) -> list[bytes]:
    return [frame + b"\r\n\r\n" for frame in span.split(b"\r\n\r\n")[:-1]]


def event(event_id: int) -> Event:
    return Event(event_id, "test", {"n": event_id}, "2026-11-23T00:00:00Z")


@given(
    size=st.integers(1, 40),
    count=st.integers(0, 120),
    after=st.integers(-5, 130),
    limit=st.integers(1, 50),
    text=st.integers(0, 30_000),  # event sizes around the ring's 64 KB chunks
)
def test_the_ring_returns_what_a_list_of_the_last_events_would(
    size: int, count: int, after: int, limit: int, text: int
) -> None:
    def sample(n: int) -> Event:
        return Event(n, "test", {"n": n, "text": "x" * (text * n % 40_000)}, "2026-11-23T00:00:00Z")

    ring = EventRing(size)
    for n in range(count):
        ring.append(n, sample(n).sse_frame)
    kept = [sample(n).sse_frame for n in range(count)][-size:]
    expected = [frame for frame in kept if frame_id(frame) > after]
    assert ring.after(after, limit) == expected[:limit]
    assert len(ring) == len(kept)
    taken, joined = ring.span(after, limit * 1000)
    fitting = [frame for frame in expected[:taken]]
    assert joined == b"".join(fitting)
    assert taken == len(expected) or sum(map(len, expected[: taken + 1])) > limit * 1000
    assert taken >= min(1, len(expected))  # a frame larger than the budget still goes


def test_the_sse_frame_carries_the_event_as_one_data_line() -> None:
    """The seed API's wire format: id, ``event: message`` and the event as JSON, also for
    text that needs escaping (a raw line break would end the data line)."""
    sample = Event(
        7,
        "agent.outgoing",
        {"message": {"text": 'two\nlines\r\n, « quotes » \u2028 and "marks"'}},
        "2026-11-23T10:00:00.000001Z",
    )
    frame = sample.sse_frame
    head, data = frame.split(b"\r\ndata: ")
    assert head == b"id: 7\r\nevent: message"
    assert data.endswith(b"\r\n\r\n") and data.count(b"\n") == 2
    assert json.loads(data) == sample.to_dict()
    # What sse-starlette makes of the same event parses to the same thing.
    theirs = ServerSentEvent(id="7", event="message", data=json.dumps(sample.to_dict())).encode()
    assert theirs.split(b"\r\n")[:2] == frame.split(b"\r\n")[:2]
    assert json.loads(theirs.split(b"data: ")[1]) == json.loads(data)
    assert frame_id(frame) == 7 and frame_event(frame) == sample


def test_subscribing_with_last_event_id_replays_the_buffer_and_reports_a_gap() -> None:
    bus = EventBus(buffer_size=5, first_id=1)
    for _ in range(8):
        bus.emit("test")
    assert bus.last_id == 8
    live = bus.subscribe()
    assert (live.replayed, live.gap) == (0, False)
    recent = bus.subscribe(6)
    assert (recent.replayed, recent.gap) == (2, False)
    assert [frame_id(e) for e in recent.take(10)] == [7, 8]
    old = bus.subscribe(1)  # 2 and 3 have left the buffer of 5
    assert (old.replayed, old.gap) == (5, True)
    assert [frame_id(e) for e in old.take(10)] == [4, 5, 6, 7, 8]
    ahead = bus.subscribe(1_000)  # another engine's id: from now on
    assert (ahead.replayed, ahead.gap) == (0, False)
    bus.emit("test")
    assert [frame_id(e) for e in ahead.take(10)] == [9]
    assert [frame_id(e) for e in live.take(10)] == [9]


def test_a_reader_a_whole_buffer_behind_is_ended_and_held_nowhere() -> None:
    bus = EventBus(buffer_size=4, first_id=1)
    slow = bus.subscribe()
    fast = bus.subscribe()
    for _ in range(3):
        bus.emit("test")
    assert [frame_id(e) for e in fast.take(10)] == [1, 2, 3]
    assert [frame_id(e) for e in slow.take(2)] == [1, 2]
    for _ in range(4):
        bus.emit("test")  # the ring now holds 4..7; slow has taken only up to 2
    assert slow.take(10) == [] and slow.overflowed and slow.closed
    assert [frame_id(e) for e in fast.take(10)] == [4, 5, 6, 7] and not fast.closed
    assert bus.subscriber_count == 1
    assert slow.take(10) == []  # ended once, counted once
    assert bus.readers_dropped == {"overflowed": 1, "stalled": 0}


def test_readers_at_one_place_share_one_joined_span() -> None:
    """With a memo (one pass of the fan-out over its readers), the frames after one
    position are joined once: every reader there gets the same bytes object."""
    bus = EventBus(first_id=1)
    behind = bus.subscribe()
    bus.emit("test")
    level = [bus.subscribe() for _ in range(3)]
    bus.emit("test")
    memo: SpanMemo = {}
    spans = [reader.take_span(1_000, memo) for reader in [*level, behind]]
    assert spans[0] is spans[1] is spans[2]
    assert [frame_id(frame) for frame in split_frames(spans[0])] == [2]
    assert [frame_id(frame) for frame in split_frames(spans[3])] == [1, 2]
    assert [reader.position for reader in [*level, behind]] == [2, 2, 2, 2]
    assert all(reader.take_span(1_000, memo) == b"" for reader in [*level, behind])


async def test_close_ends_the_wait_for_the_end_and_a_cancelled_wait_disturbs_none() -> None:
    bus = EventBus(first_id=1)
    gone, stays, shut = bus.subscribe(), bus.subscribe(), bus.subscribe()
    waiting = [asyncio.create_task(s.until_closed()) for s in (gone, stays, shut)]
    await asyncio.sleep(0)  # every one is waiting now
    waiting[0].cancel()
    bus.emit("test")  # news does not end a wait for the end
    stays.close()
    await waiting[1]
    assert not waiting[2].done()
    bus.close_subscriptions()
    await waiting[2]
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]
    assert bus.subscriber_count == 0
    await bus.subscribe().until_closed()  # a reader arriving during shutdown: at once


def test_recent_keeps_its_meaning() -> None:
    bus = EventBus(buffer_size=3, first_id=1)
    assert bus.recent() == []
    for _ in range(5):
        bus.emit("test")
    assert [e.id for e in bus.recent()] == [3, 4, 5]
    assert [e.id for e in bus.recent(2)] == [4, 5]


@given(st.lists(st.integers(0, 4_102_444_800 * 10**9), min_size=1, max_size=20))
def test_a_timestamp_reads_as_the_instant_it_stamps(instants_ns: list[int]) -> None:
    """Each stamp is the instant to the microsecond, in datetime's ISO form with a Z,
    whatever came before it (the date part is cached from one second to the next)."""
    clock = iter(instants_ns)
    stamp = UtcStamp(lambda: next(clock))
    for instant in instants_ns:
        text = stamp()
        expected = EPOCH + timedelta(microseconds=instant // 1000)
        assert text == expected.isoformat(timespec="microseconds").replace("+00:00", "Z")
