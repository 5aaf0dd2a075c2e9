"""A fake LLM vendor on loopback speaking the real OpenAI and Anthropic HTTP APIs.

The official SDKs use httpx2, which respx cannot intercept; pointing them at a real
server (``base_url``) runs their whole code path. Every request is recorded and
each response is taken from a script.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeVendor:
    script: deque[tuple[int, dict[str, Any]]] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0

    def reply(self, body: dict[str, Any], status: int = 200) -> None:
        self.script.append((status, body))

    async def _handle(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(Recorded(request.url.path, dict(request.headers), body))
        if not self.script:
            return JSONResponse({"error": {"message": "no scripted response"}}, status_code=500)
        status, payload = self.script.popleft()
        return JSONResponse(payload, status_code=status)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def openai_text(text: str, *, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "gpt-fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 5,
            "total_tokens": 17,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    }


def anthropic_message(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": blocks,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 20,
            "output_tokens": 7,
            "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": 1,
        },
    }


class VendorServer:
    """Serve a FakeVendor with uvicorn in a background thread."""

    def __init__(self, vendor: FakeVendor) -> None:
        self.vendor = vendor
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", vendor._handle, methods=["POST"]),
                Route("/v1/messages", vendor._handle, methods=["POST"]),
            ]
        )
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        vendor.port = self._sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def __enter__(self) -> FakeVendor:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("the fake vendor did not start")
            time.sleep(0.01)
        return self.vendor

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
