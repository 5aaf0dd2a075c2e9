"""An instant fake LLM vendor on loopback for the benchmarks: OpenAI's
``POST /v1/chat/completions`` and Anthropic's ``POST /v1/messages``, whole or streamed,
always the same short answer.

It runs in a process of its own (``FakeVendor`` starts this file, handing it the
listening socket), so that none of its CPU is counted as the engine's or the
benchmark's, and it notes when each request reaches it (``time.monotonic()``, one
clock for every process on the machine): the benchmark asks ``GET /arrivals`` for
them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

ANSWER = "All done."


def _openai_whole() -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ANSWER},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }
    ).encode()


def _openai_frames() -> list[bytes]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(data)}\n\n".encode()

    usage = {
        **head,
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": ANSWER}),
        chunk({}, "stop"),
        f"data: {json.dumps(usage)}\n\n".encode(),
        b"data: [DONE]\n\n",
    ]


def _anthropic_message(content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }


def _anthropic_frames() -> list[bytes]:
    def event(kind: str, data: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    text = {"type": "text_delta", "text": ANSWER}
    return [
        event("message_start", {"message": _anthropic_message([], None)}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"index": 0, "delta": text}),
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        event("message_stop", {}),
    ]


def _serve(sock: socket.socket) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    arrivals: list[float] = []
    openai_whole = _openai_whole()
    anthropic_whole = json.dumps(
        _anthropic_message([{"type": "text", "text": ANSWER}], "end_turn")
    ).encode()
    openai_frames, anthropic_frames = _openai_frames(), _anthropic_frames()

    async def frames(items: list[bytes]) -> AsyncIterator[bytes]:
        for item in items:
            yield item

    def answer(whole: bytes, streamed: list[bytes]):  # type: ignore[no-untyped-def]
        async def handle(request: Request) -> Response:
            arrivals.append(time.monotonic())
            body = await request.body()
            if b'"stream":true' in body:
                return StreamingResponse(frames(streamed), media_type="text/event-stream")
            return Response(whole, media_type="application/json")

        return handle

    async def arrived(_: Request) -> JSONResponse:
        return JSONResponse(arrivals)

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", answer(openai_whole, openai_frames), methods=["POST"]),
            Route("/v1/messages", answer(anthropic_whole, anthropic_frames), methods=["POST"]),
            Route("/arrivals", arrived),
        ]
    )
    config = uvicorn.Config(app, log_level="error", lifespan="off", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


class FakeVendor:
    """The fake vendor in its own process, listening on 127.0.0.1 (``base_url``)."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(128)
        host, port = self._socket.getsockname()
        self.base_url = f"http://{host}:{port}"
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> FakeVendor:
        fd = self._socket.fileno()
        self._process = subprocess.Popen([sys.executable, __file__, str(fd)], pass_fds=[fd])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/arrivals", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("the fake vendor did not start")

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
        self._socket.close()

    def arrivals(self) -> list[float]:
        return list(httpx.get(f"{self.base_url}/arrivals", timeout=10).json())


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
