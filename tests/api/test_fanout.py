"""Event streams written by their bus's sweep (api/fanout.py), through a stream's ASGI
door.

An event reaches every stream in one sweep, none waiting for a turn of its own; the
frames after one position are joined once for all the readers there; an event that
comes while the sweep goes round joins the writes of the streams it has not reached
yet; a reader whose writes wait (its socket is full) holds back nobody, and gets what
came meanwhile, in order, once its write is done. Each test waits for turns of the
loop, not for a clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from starlette.types import Message

from claybot.api.fanout import SLICE_WRITES, fan_out_of
from claybot.api.sse import EventStream
from claybot.kernel.events import EventBus, frame_id

READERS = 200
SCOPE = {"type": "http", "path": "/v1/engine/events"}


class Reader:
    """A stream's client: the bodies the stream sent it, in order. ``hold`` makes its
    next writes wait (as a write to a full socket does) until ``release``."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.gone = asyncio.Event()
        self._held: asyncio.Future[None] | None = None
        self.waiting = False  # a write of the stream is waiting on this reader

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] != "http.response.body":
            return
        if self._held is not None:
            self.waiting = True
            await self._held
            self.waiting = False
        self.bodies.append(message["body"])

    def hold(self) -> None:
        self._held = asyncio.get_running_loop().create_future()

    def release(self) -> None:
        assert self._held is not None
        self._held.set_result(None)
        self._held = None

    @property
    def ids(self) -> list[int]:
        """The ids of the event frames it got (the init frame, first, has none)."""
        frames = b"".join(self.bodies[1:]).split(b"\r\n\r\n")[:-1]
        return [frame_id(frame + b"\r\n\r\n") for frame in frames]


async def within_turns(condition: Callable[[], bool], turns: int = 2_000) -> None:
    """Until ``condition`` holds, letting the loop run; fails after ``turns`` turns."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("not reached within the turns of the loop")


async def open_streams(bus: EventBus, readers: list[Reader]) -> list[asyncio.Task[None]]:
    streams = []
    for reader in readers:
        stream = EventStream({"type": "init"}, bus.subscribe(), ping_s=60)
        streams.append(asyncio.create_task(stream(SCOPE, reader.receive, reader.send)))
    await within_turns(lambda: all(reader.bodies for reader in readers))  # their init frames
    return streams


async def close_streams(readers: list[Reader], streams: list[asyncio.Task[None]]) -> None:
    for reader in readers:
        reader.gone.set()
    await asyncio.gather(*streams)


async def test_an_event_reaches_every_stream_in_one_sweep() -> None:
    bus = EventBus(first_id=1)
    readers = [Reader() for _ in range(READERS)]
    streams = await open_streams(bus, readers)
    bus.emit("test", {"n": 1})
    # No reader waits for the others' turns (a budget of writes a second had the 200th
    # reader of one event wait 150 ms).
    await within_turns(lambda: all(reader.ids == [1] for reader in readers))
    # The frame was joined once and handed to every stream as the same bytes.
    first = readers[0].bodies[-1]
    assert all(reader.bodies[-1] is first for reader in readers)
    bus.emit("test", {"n": 2})
    bus.emit("test", {"n": 3})  # in the same turn of the loop: one write each
    await within_turns(lambda: all(reader.ids == [1, 2, 3] for reader in readers))
    assert all(len(reader.bodies) == 3 for reader in readers)  # init, [1], [2, 3]
    await close_streams(readers, streams)
    assert bus.subscriber_count == 0


async def test_a_reader_whose_writes_wait_holds_back_nobody_and_then_gets_the_rest() -> None:
    bus = EventBus(first_id=1)
    readers = [Reader() for _ in range(READERS)]
    streams = await open_streams(bus, readers)
    slow, others = readers[7], readers[:7] + readers[8:]
    slow.hold()
    bus.emit("test", {"n": 1})
    await within_turns(lambda: slow.waiting and all(r.ids == [1] for r in others))
    for n in (2, 3, 4):  # rounds of their own, while its write of the first still waits
        bus.emit("test", {"n": n})
        await within_turns(lambda n=n: all(r.ids == list(range(1, n + 1)) for r in others))
        assert all(r.bodies[-1] is others[0].bodies[-1] for r in others)  # one round's
    assert slow.ids == [] and slow.waiting
    slow.release()
    # Its waiting write goes on, then what came meanwhile follows in one write.
    await within_turns(lambda: slow.ids == [1, 2, 3, 4])
    assert len(slow.bodies) == 3  # init, [1], [2, 3, 4]
    bus.emit("test", {"n": 5})
    await within_turns(lambda: all(r.ids == [1, 2, 3, 4, 5] for r in readers))
    await close_streams(readers, streams)
    assert bus.readers_dropped == {"overflowed": 0, "stalled": 0}


async def test_an_event_that_comes_during_a_sweep_joins_the_writes_it_has_not_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fan-out measures, and the loop rests, on CPU time: by the wall clock, another
    # process taking the core between two slices made the loop look busy, and the sweep
    # rested past the turns waited here.
    monkeypatch.setattr(asyncio.get_running_loop(), "time", time.thread_time)
    bus = EventBus(first_id=1)
    fan_out_of(bus, clock=time.thread_time)
    readers = [Reader() for _ in range(READERS)]
    streams = await open_streams(bus, readers)
    bus.emit("test", {"n": 1})
    await within_turns(lambda: any(reader.ids == [1] for reader in readers))
    reached = [reader for reader in readers if reader.ids == [1]]
    assert len(reached) == SLICE_WRITES  # one slice, then the loop ran
    bus.emit("test", {"n": 2})
    await within_turns(lambda: all(reader.ids == [1, 2] for reader in readers))
    for reader in readers:  # init, then one write each for 1 and 2 or both at once
        assert len(reader.bodies) == (3 if reader in reached else 2)
    await close_streams(readers, streams)


class SlowReader(Reader):
    """A reader whose every write costs the engine ``cost_s`` of its loop's CPU time (a
    write to a socket takes the engine's time: 10-50 us, more for large writes)."""

    def __init__(self, cost_s: float) -> None:
        super().__init__()
        self.cost_s = cost_s

    async def send(self, message: Message) -> None:
        spin(self.cost_s)
        await super().send(message)


def spin(seconds: float) -> None:
    """Keep the loop busy for ``seconds`` of its CPU time, as work on it does.

    CPU time, not the wall clock's: on a shared machine another process may take the
    core in the middle of a slice of the sweep, and by the wall clock the streams would
    then seem to have taken that time (the fan-out measures with the same clock here).
    """
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


async def test_on_a_busy_loop_the_streams_take_a_bounded_share_in_fewer_larger_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fan-out measures its cycles, and the loop times its rests, in the CPU time
    # spin() spends: what another process on the machine takes is no one's here.
    monkeypatch.setattr(asyncio.get_running_loop(), "time", time.thread_time)
    bus = EventBus(first_id=1)
    fan_out_of(bus, clock=time.thread_time)
    readers = [SlowReader(cost_s=0.0005) for _ in range(16)]
    streams = await open_streams(bus, readers)
    events = 50
    for n in range(1, events + 1):  # an event each turn of a loop with 40 ms of work
        bus.emit("test", {"n": n})
        spin(0.04)
        await asyncio.sleep(0)

    # The last writes may wait for the end of a rest: the loop's clock runs as it works.
    def done() -> bool:
        return all(reader.ids == list(range(1, events + 1)) for reader in readers)

    for _ in range(100):
        if done():
            break
        spin(0.01)
        await asyncio.sleep(0)
    assert done()
    # Writing at every chance, each stream would get a write every other turn (two
    # slices of 8 writes make a cycle): 25 writes. A cycle whose slices took 8 ms of
    # the 48 it lasted makes the next wait 150 ms: 10 or so writes.
    writes = [len(reader.bodies) - 1 for reader in readers]  # the init frame's is not one
    assert all(count <= 12 for count in writes), writes
    await close_streams(readers, streams)
