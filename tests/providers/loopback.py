"""A scripted HTTP server on 127.0.0.1 for faking LLM vendors.

The official SDKs send through httpx2, which respx cannot intercept; pointing them
at a real server (``base_url``) runs their whole code path: headers, retries, JSON
decoding, error classes. Every request is recorded, and each answer is the next
entry of a script.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]
    raw: bytes = b""  # the body as it came


@dataclass(frozen=True)
class ScriptedResponse:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class ScriptedVendor:
    """Records requests to ``path`` and answers from a script (500 when it runs out)."""

    path = "/"

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: deque[ScriptedResponse] = deque()
        self.base_url = ""  # set once the server listens
        # A streamed answer stops after this many frames until ``release_stream``.
        self._hold_after: int | None = None
        self._release = threading.Event()
        self.frames_sent = 0  # of the streamed answer under way

    def hold_stream_after(self, frames: int) -> None:
        """Streamed answers pause after ``frames`` frames until ``release_stream()``:
        what a client shows before the end of a reply can then be looked at."""
        self._hold_after = frames
        self._release.clear()

    def release_stream(self) -> None:
        self._release.set()

    def stream_frames(self, body: dict[str, Any], request: dict[str, Any]) -> list[str]:
        """The SSE frames that stream the answer ``body`` (each vendor has its own)."""
        raise NotImplementedError

    def respond(self, status: int, body: dict[str, Any], headers: dict[str, str] | None) -> None:
        self._script.append(ScriptedResponse(status, body, headers or {}))

    async def handle(self, request: Request) -> JSONResponse:
        raw = await request.body()
        self.requests.append(
            RecordedRequest(request.url.path, dict(request.headers), json.loads(raw), raw)
        )
        if not self._script:
            return JSONResponse({"error": {"message": "the fake has no scripted response"}}, 500)
        answer = self._script.popleft()
        body = self.requests[-1].body
        if body.get("stream") and answer.status == 200:
            frames = self.stream_frames(answer.body, body)
            return StreamingResponse(self._send(frames), media_type="text/event-stream")
        return JSONResponse(answer.body, answer.status, headers=answer.headers)

    async def _send(self, frames: list[str]) -> AsyncIterator[bytes]:
        self.frames_sent = 0
        for frame in frames:
            if self.frames_sent == self._hold_after:
                await asyncio.to_thread(self._release.wait, START_TIMEOUT_S * 6)
            yield frame.encode()
            self.frames_sent += 1

    @property
    def last_body(self) -> dict[str, Any]:
        return self.requests[-1].body


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()  # also on failure, so the test does not wait for nothing


class LoopbackServer:
    """Serve a ScriptedVendor with uvicorn on an ephemeral port, in a background thread."""

    def __init__(self, vendor: ScriptedVendor) -> None:
        self.vendor = vendor
        app = Starlette(routes=[Route(vendor.path, vendor.handle, methods=["POST"])])
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        host, port = self._socket.getsockname()
        vendor.base_url = f"http://{host}:{port}"
        config = uvicorn.Config(app, log_level="error", lifespan="off", timeout_graceful_shutdown=2)
        self._ready = threading.Event()
        self._server = _Server(config, self._ready)
        self._thread = threading.Thread(target=self._run, name="fake-vendor", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._socket]))

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S) or not self._server.started:
            self.__exit__()
            raise RuntimeError("the fake vendor server did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(START_TIMEOUT_S)
        self._socket.close()
