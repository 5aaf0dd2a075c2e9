"""The proactive agents' two WebSocket dialects and their heartbeat, on a short interval.

An engine served by uvicorn on a Unix socket, with ``proactive.wsHeartbeatS`` at a
fifth of a second (the default, 25 s, is held to codeck's 45 s limit for real in
``tests/conformance/test_codeck.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, unix_connect

from claybot.config.home import HomePaths
from claybot.config.settings import ProactiveSettings
from claybot.engine.engine import Engine, EngineOptions
from claybot.server.app import create_app
from claybot.server.listeners import bind_unix_socket, make_server
from tests.conftest import write_settings

HEARTBEAT_S = 0.2
SETTINGS: dict[str, Any] = {
    "providers": [{"id": "s", "type": "scripted", "model": "echo"}],
    "proactive": {"wsHeartbeatS": HEARTBEAT_S},
}


@pytest.fixture
async def served() -> AsyncIterator[tuple[Engine, Path]]:
    home = Path(f"/tmp/cb-pws-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    paths = HomePaths(home)
    write_settings(paths, SETTINGS)
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    server = make_server(create_app(engine))
    serving = asyncio.create_task(server.serve(sockets=[bind_unix_socket(paths.socket)]))
    while not server.started:
        await asyncio.sleep(0.01)
    yield engine, paths.socket
    server.should_exit = True
    await engine.stop(drain_timeout_s=2)
    await serving
    await asyncio.to_thread(shutil.rmtree, home, ignore_errors=True)


async def timed(ws: ClientConnection, count: int) -> list[tuple[float, dict[str, Any]]]:
    got = []
    async with asyncio.timeout(10):
        while len(got) < count:
            got.append((time.monotonic(), json.loads(await ws.recv())))
    return got


async def test_claybots_dialect_lists_first_then_beats_when_idle(
    served: tuple[Engine, Path],
) -> None:
    _, socket = served
    async with unix_connect(str(socket), uri="ws://claybot/api/agents/ws") as ws:
        messages = [m for _, m in await timed(ws, 3)]
    assert messages[0] == {"type": "agent:list", "data": {"agents": []}}
    assert messages[1:] == [{"type": "heartbeat"}] * 2


async def test_codecks_dialect_sends_only_its_types_and_beats_through_the_rest(
    served: tuple[Engine, Path],
) -> None:
    """Messages codeck's client does not know are not sent, and do not count as sent: a
    stream of them must not keep the client in silence past the heartbeat."""
    engine, socket = served
    hub = engine.proactive.broadcaster
    async with unix_connect(str(socket), uri="ws://claybot/") as ws:
        [(_, status)] = await timed(ws, 1)
        assert status["type"] == "status" and status["data"]["workspace"]

        async def noise() -> None:
            while True:
                hub.publish("agent:skipped", {"agentId": "a", "reason": "running"})
                hub.publish("agent:deleted", {"agentId": "b"})
                await asyncio.sleep(HEARTBEAT_S / 10)

        chatter = asyncio.create_task(noise())
        try:
            beats = await timed(ws, 3)
        finally:
            chatter.cancel()
        hub.publish("agent:output", {"agentId": "a", "text": "hi"})
        [(_, output)] = await timed(ws, 1)
    assert [m for _, m in beats] == [{"type": "heartbeat"}] * 3
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(beats)]
    assert all(gap < 3 * HEARTBEAT_S for gap in gaps), gaps
    assert output == {"type": "agent:output", "data": {"agentId": "a", "text": "hi"}}


def test_the_heartbeat_is_always_inside_codecks_45_s() -> None:
    assert ProactiveSettings().ws_heartbeat_s < 45
    with pytest.raises(ValueError, match="wsHeartbeatS"):
        ProactiveSettings.model_validate({"wsHeartbeatS": 45})
