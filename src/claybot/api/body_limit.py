"""Refuse request bodies over a size limit with 413, whether or not they declare a length.

A declared ``Content-Length`` over the limit is refused before anything is read. A
chunked body is read here, up to the limit, before the app runs: FastAPI reads the
body inside the route and turns any exception raised while it reads into a 400, so
counting bytes as the app reads them could never answer 413. Holding at most
``max_bytes`` (1 MiB) per request is what FastAPI would have held anyway. Paths
that take files (seed 002's upload, a message's files) get their own limit
(``larger``; ``larger_under`` for the paths below a prefix), read the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from claybot.api.error_shapes import reshaped

DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class BodyLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = DEFAULT_MAX_BODY_BYTES,
        larger: Mapping[str, Callable[[], int]] | None = None,
        larger_under: Mapping[str, Callable[[], int]] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = dict(larger or {})  # path -> its limit, read at each request
        # path prefix -> its limit, for paths with ids in them (a chat page's form)
        self.larger_under = dict(larger_under or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = self._limit(path)
        if self._declared_too_large(scope, limit):
            await self._reject(send, path, limit)
            return
        buffered = await self._read_body(receive, limit)
        if buffered is None:
            await self._reject(send, path, limit)
            return
        replayed = False

        async def replay_receive() -> Message:
            # The body once, as one message; then whatever the client sends next (a
            # disconnect), which streaming responses such as SSE wait for.
            nonlocal replayed
            if not replayed:
                replayed = True
                return buffered
            return await receive()

        await self.app(scope, replay_receive, send)

    def _limit(self, path: str) -> int:
        if path in self.larger:
            return self.larger[path]()
        for prefix, limit in self.larger_under.items():
            if path.startswith(prefix):
                return limit()
        return self.max_bytes

    def _declared_too_large(self, scope: Scope, limit: int) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    return int(value) > limit
                except ValueError:
                    return False  # the server refuses a malformed length itself
        return False

    async def _read_body(self, receive: Receive, limit: int) -> Message | None:
        """The whole body as one ``http.request`` message; None if it is over the limit.

        A disconnect before the body ends is handed to the app as it is, so the
        app sees the same disconnect it would have seen reading the body itself.
        """
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

    async def _reject(self, send: Send, path: str, limit: int) -> None:
        message = f"request body is larger than {limit} bytes"
        body = json.dumps({"ok": False, "error": {"code": "too_large", "message": message}})
        encoded = body.encode()
        shaped = reshaped(path, 413, "too_large", message, None)
        if shaped is not None:
            _, encoded, _ = shaped
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(encoded)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": encoded})
