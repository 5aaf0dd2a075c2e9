"""GET /v1/engine/events with many readers, through a real engine's Unix socket.

Every reader gets every event once and in order; a reader that stops reading is
dropped after the send timeout while the others keep getting everything.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from claybot.api.fanout import SEND_TIMEOUT_S
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow

READERS = 40
MESSAGES = 60


async def follow(response: httpx.Response, until: set[str]) -> tuple[dict[str, Any], list[Any]]:
    """The init frame and the events after it, until replies to ``until`` have all come."""
    init: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    waiting = set(until)
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        data = json.loads(line[6:])
        if init is None:
            init = data
            continue
        events.append(data)
        if data["type"] == "agent.outgoing":
            waiting.discard(data["payload"]["message"]["inReplyTo"])
            if not waiting:
                return init, events
    raise AssertionError(f"the stream ended with {len(waiting)} replies still to come")


async def post(client: httpx.AsyncClient, user: str, message_id: str, text: str = "hi") -> None:
    response = await client.post(
        "/v1/engine/messages",
        json={"userId": user, "channelId": "sse", "text": text, "messageId": message_id},
    )
    assert response.status_code == 202, response.text


def replies_in(events: list[dict[str, Any]]) -> list[str]:
    return [e["payload"]["message"]["inReplyTo"] for e in events if e["type"] == "agent.outgoing"]


async def test_many_readers_each_get_every_event_once_and_in_order(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    message_ids = {f"m{n}" for n in range(MESSAGES)}
    async with AsyncExitStack() as stack:
        streams = []
        for _ in range(READERS):
            client = await stack.enter_async_context(engine_process.async_client())
            streams.append(
                await stack.enter_async_context(client.stream("GET", "/v1/engine/events"))
            )
        readers = [asyncio.create_task(follow(stream, message_ids)) for stream in streams]
        poster = await stack.enter_async_context(engine_process.async_client())
        # Several agents at once, so events of different turns interleave.
        await asyncio.gather(*(post(poster, f"user{n % 7}", f"m{n}") for n in range(MESSAGES)))
        results = await asyncio.wait_for(asyncio.gather(*readers), 60)

    by_id: dict[int, dict[str, Any]] = {}
    for init, events in results:
        ids = [e["id"] for e in events]
        # Consecutive ids from the init frame's: none missing, none twice, in order.
        assert ids == list(range(init["id"] + 1, init["id"] + 1 + len(ids)))
        assert sorted(replies_in(events)) == sorted(message_ids)
        for e in events:
            assert by_id.setdefault(e["id"], e) == e  # every reader got the same event


async def test_a_reader_that_stops_reading_is_dropped_and_the_others_keep_up(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    log = engine_process.paths.logs / "engine.log"
    text = "x" * 8_000  # each reply is an 8 KB event: a stalled socket fills in a few dozen

    def dropped() -> bool:
        lines = log.read_text().splitlines() if log.exists() else []
        return any(json.loads(line).get("action") == "events.reader_dropped" for line in lines)

    async with AsyncExitStack() as stack:
        stalled_client = await stack.enter_async_context(engine_process.async_client())
        stalled = await stack.enter_async_context(stalled_client.stream("GET", "/v1/engine/events"))
        live = []
        for _ in range(3):
            client = await stack.enter_async_context(engine_process.async_client())
            live.append(await stack.enter_async_context(client.stream("GET", "/v1/engine/events")))
        # One agent answers everything in order: its reply to "final" is the last one.
        readers = [asyncio.create_task(follow(stream, {"final"})) for stream in live]
        poster = await stack.enter_async_context(engine_process.async_client())
        posted: list[str] = []
        started = time.monotonic()
        # Nothing reads ``stalled`` from here on. Its socket buffers fill, the engine's
        # next write to it waits, and SEND_TIMEOUT_S later it is dropped.
        while not dropped():
            message_id = f"fill{len(posted)}"
            await post(poster, "filler", message_id, text)
            posted.append(message_id)
            assert len(posted) < 5_000, "the stalled reader was never dropped"
        took_s = time.monotonic() - started
        await post(poster, "filler", "final")
        results = await asyncio.wait_for(asyncio.gather(*readers), 60)
        assert (await poster.get("/v1/engine/status")).status_code == 200
        metrics = (await poster.get("/metrics")).text

        # The stalled reader, reading again, finds what its buffers held, then the end.
        stalled_ids: list[int] = []
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            async for line in stalled.aiter_lines():
                if line.startswith("data: "):
                    stalled_ids.append(json.loads(line[6:])["id"])
            raise AssertionError("the dropped stream ended cleanly")  # pragma: no cover

    for init, events in results:
        ids = [e["id"] for e in events]
        assert ids == list(range(init["id"] + 1, init["id"] + 1 + len(ids)))
        assert replies_in(events) == [*posted, "final"]
    all_ids = [e["id"] for e in results[0][1]]
    assert stalled_ids[1:] == all_ids[: len(stalled_ids) - 1]  # after its init frame
    assert len(stalled_ids) < len(all_ids)
    # Its buffers hold a few dozen of these events; the wait for them to fill is short.
    assert took_s < SEND_TIMEOUT_S + 30
    dropped_readers = {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "claybot_event_readers_dropped"
        for sample in family.samples
    }
    assert dropped_readers == {"stalled": 1, "overflowed": 0}
