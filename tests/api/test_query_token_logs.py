"""A WebSocket's ``?token=`` (codeck's browser client) never reaches a log line.

uvicorn logs each handshake with its path and query string (at INFO, and the
websockets library its raw request line at DEBUG). The engine runs uvicorn at WARNING,
so these lines are off; here they are turned on, on a real server over TCP, to see
that what they would print holds no key: the TCP listener takes the token out of the
query before uvicorn logs (``tcp_auth.take_query_token``), and a filter on uvicorn's
loggers redacts any that is left (``server.QueryTokenFilter``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Iterator

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.types import ASGIApp
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.db.keys import MemoryApiKeyStore
from claybot.server.listeners import UVICORN_LOGGERS, QueryTokenFilter, bind_tcp_socket, make_server


async def hello(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("hello")
    await websocket.close()


APP = Starlette(routes=[WebSocketRoute("/", hello)])


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[Lines]:
    """Every line uvicorn's loggers would print, down to DEBUG (``serve`` turns them on)."""
    handler = Lines()
    loggers = [logging.getLogger(name) for name in UVICORN_LOGGERS]
    levels = [logger.level for logger in loggers]
    yield handler
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
async def serve(lines: Lines) -> AsyncIterator[object]:
    started: list[tuple[asyncio.Task[None], object]] = []

    async def start(app: ASGIApp) -> str:
        server = make_server(app)
        # After uvicorn's own logging setup, which replaces its loggers' handlers.
        for name in UVICORN_LOGGERS:
            logging.getLogger(name).setLevel(logging.DEBUG)
            logging.getLogger(name).addHandler(lines)
        sock: socket.socket = bind_tcp_socket("127.0.0.1", 0)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        started.append((task, server))
        while not server.started:
            await asyncio.sleep(0.01)
        return f"127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for task, server in started:
        server.should_exit = True  # type: ignore[attr-defined]
        await task


async def test_the_tcp_listener_takes_the_token_out_before_uvicorn_logs(
    serve: object, lines: Lines
) -> None:
    """The handshake's line shows the query without the token (taken out of the scope);
    the websockets library's request line, logged before any app runs, has it redacted."""
    store = MemoryApiKeyStore()
    _, key = await store.create("browser", ["agents:read"])
    host = await serve(ApiKeyMiddleware(APP, store))  # type: ignore[operator]
    async with connect(f"ws://{host}/?token={key}&page=1") as ws:
        assert await ws.recv() == "hello"
    with pytest.raises(InvalidStatus):
        async with connect(f"ws://{host}/?token={key}x"):
            pass
    handshakes = [line for line in lines.lines if '"WebSocket /' in line]
    assert len(handshakes) == 2, lines.lines  # the lines are on, and say the path
    assert '"WebSocket /?page=1" [accepted]' in handshakes[0]
    assert all(key not in line for line in lines.lines), lines.lines


async def test_a_token_left_in_a_query_is_redacted_from_uvicorns_lines(
    serve: object, lines: Lines
) -> None:
    """Without the TCP listener (the Unix socket serves the bare app), the filter alone."""
    secret = "cb_secret-in-the-query-0123456789"
    host = await serve(APP)  # type: ignore[operator]
    async with connect(f"ws://{host}/?page=2&token={secret}") as ws:
        assert await ws.recv() == "hello"
    assert any("token=[redacted]" in line for line in lines.lines), lines.lines
    assert all(secret not in line for line in lines.lines), lines.lines


def test_the_filter_keeps_the_arguments_uvicorns_access_formatter_unpacks() -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/x?a=1&TOKEN=cb_abc&b=2", "1.1", 200), None,
    )  # fmt: skip
    assert QueryTokenFilter().filter(record)
    assert record.args == ("127.0.0.1:5", "GET", "/x?a=1&TOKEN=[redacted]&b=2", "1.1", 200)
