"""API keys on the TCP listener: a plain ASGI middleware (it must not buffer SSE).

The Unix socket serves the bare app (the owner's, trusted); TCP serves the app
wrapped in ``ApiKeyMiddleware``: ``Authorization: Bearer cb_...``, the route's
scope (``admin`` passes every check), and the key's rate limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from claybot.db.errors import StoreError
from claybot.engine.ipc.ratelimit import SlidingWindowLimiter

if TYPE_CHECKING:
    from claybot.db.keys import ApiKeyStore

log = logging.getLogger(__name__)

OPEN_PATHS = ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")


def required_scope(method: str, path: str) -> str | None:
    """The scope a route needs; None means any valid key will do."""
    if path in OPEN_PATHS:
        return None
    if path.startswith("/v1/engine/"):
        return "admin"
    if path == "/api/agents" or path.startswith("/api/agents/"):
        return "agents:read" if method in ("GET", "HEAD") else "agents:write"
    if path == "/api/v1/jobs" or path.startswith("/api/v1/jobs/"):
        if method in ("GET", "HEAD"):
            return "jobs:read"
        return "jobs:delete" if method == "DELETE" else "jobs:write"
    return "admin"


class ApiKeyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        store: ApiKeyStore,
        limiter: SlidingWindowLimiter | None = None,
        scope_for: Callable[[str, str], str | None] = required_scope,
    ) -> None:
        self.app = app
        self.store = store
        self.limiter = limiter or SlidingWindowLimiter()
        self.scope_for = scope_for
        self._pending: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        presented = _bearer(scope)
        if presented is None:
            await _deny(
                scope,
                send,
                401,
                "unauthorized",
                "an API key is required: Authorization: Bearer cb_...",
            )
            return
        try:
            record = await self.store.verify(presented)
        except StoreError as exc:
            await _deny(scope, send, 503, "unavailable", f"cannot check API keys right now: {exc}")
            return
        if record is None:
            await _deny(scope, send, 401, "unauthorized", "the API key is unknown or revoked")
            return
        needed = self.scope_for(str(scope.get("method", "GET")), str(scope["path"]))
        if not record.allows(needed):
            await _deny(scope, send, 403, "forbidden", f"this API key lacks the scope {needed!r}")
            return
        decision = self.limiter.check(record.id, record.rate_limit_rpm)
        if not decision.allowed:
            await _deny(
                scope, send, 429, "rate_limited",
                f"more than {record.rate_limit_rpm} requests per minute",
                retry_after=decision.retry_after_s,
            )  # fmt: skip
            return
        task = asyncio.create_task(self._record_use(record.id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        scope.setdefault("state", {})["api_key"] = record
        await self.app(scope, receive, send)

    async def _record_use(self, key_id: str) -> None:
        try:
            await self.store.record_use(key_id)
        except StoreError:
            log.warning("could not record API key use", extra={"action": "keys.record_use_failed"})


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            header: str = bytes(value).decode("latin-1")
            scheme, _, token = header.partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token:
                return token
            return None
    return None


async def _deny(
    scope: Scope, send: Send, status: int, code: str, message: str, retry_after: int | None = None
) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 4000 + status})
        return
    body = json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="claybot"'))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
