"""WebSocket fan-out: a slow client is dropped, not buffered forever; shutdown ends every client."""

from __future__ import annotations

from claybot.proactive.broadcast import CLIENT_QUEUE_SIZE, Broadcaster


async def test_a_client_that_falls_behind_is_dropped_and_the_others_keep_up() -> None:
    hub = Broadcaster()
    slow, fast = hub.listen(), hub.listen()
    got: list[int] = []
    for n in range(CLIENT_QUEUE_SIZE + 1):
        hub.publish("agent:output", {"n": n})
        if n < 3:
            got.append((await anext(aiter(fast)))["data"]["n"])
    assert slow.overflowed and slow.closed and not fast.closed
    assert got == [0, 1, 2] and hub.listener_count == 1


async def test_closing_ends_every_client_and_a_late_one_at_once() -> None:
    hub = Broadcaster()
    early = hub.listen()
    hub.publish("agent:update", {"id": "a"})
    hub.close()
    assert [m["type"] async for m in early] == ["agent:update"]
    late = hub.listen()
    assert [m async for m in late] == [] and hub.listener_count == 0
