"""API keys on the TCP listener: a plain ASGI middleware (it must not buffer SSE).

The Unix socket serves the bare app (the owner's, trusted); TCP serves the app
wrapped in ``ApiKeyMiddleware``: ``Authorization: Bearer cb_...``, the route's
scope (``admin`` passes every check), and the key's rate limit. A client address
that keeps presenting unknown keys has its failures answered 429, mostly without a
lookup, while its valid keys still get in (``claybot.api.key_check``). A job artifact's
signed link opens that one file without a key (``claybot.jobs.artifact_links``).

A browser cannot set a header on a WebSocket, so codeck's web client sends its key as
``?token=`` of the WebSocket's URL. A WebSocket (and only a WebSocket) without a key
in its headers may bring it there. Either way the token leaves the query string here,
before anything reads the scope: uvicorn's log line of the handshake, the routes and
their error logs never see it (``take_query_token``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from starlette.types import ASGIApp, Receive, Scope, Send

from claybot.api.dashboard_paths import is_dashboard_path
from claybot.api.error_shapes import reshaped
from claybot.api.key_check import check_key, client_address
from claybot.api.ratelimit import FailureLimiter, RateLimiter, SlidingWindowLimiter
from claybot.db.errors import StoreError
from claybot.jobs.artifact_links import ArtifactLinks

if TYPE_CHECKING:
    from claybot.db.keys import ApiKeyStore

log = logging.getLogger(__name__)

# Paths any valid key may read, whatever its scopes: the API's own description.
OPEN_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
# Paths that need no key at all: seed 002's health check (it says nothing of the engine),
# and codeck's login, whose body brings the key (it checks it, with the failure limit).
PUBLIC_PATHS = frozenset({"/api/v1/health", "/api/auth/status", "/api/auth/login"})
# codeck's WebSocket: at the root, where its client connects (HTTP / is the dashboard's).
CODECK_WS_PATH = "/"
QUERY_TOKEN = "token"
# A WebSocket's scope has no method: it is checked as this one, which only reads here.
WEBSOCKET = "WEBSOCKET"
READ_METHODS = frozenset({"GET", "HEAD", WEBSOCKET})
ScopeTable = Callable[[str, str], str | None]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def required_scope(method: str, path: str) -> str | None:
    """The scope a route needs; None means any valid key will do.

    Unknown paths need ``admin``: a route added later is closed until it is listed here.
    """
    if path in OPEN_PATHS:
        return None
    if path.startswith("/v1/engine/"):
        return "admin"
    if path == "/metrics":
        return "metrics"  # what a Prometheus server scrapes with, and nothing else
    if path == "/v1/chat/completions" or _under(path, "/v1/models"):
        return "chat"  # the OpenAI-compatible door
    if _under(path, "/api/agents"):
        return "agents:read" if method in READ_METHODS else "agents:write"
    if path == CODECK_WS_PATH and method == WEBSOCKET:
        return "agents:read"  # codeck's WebSocket (HTTP / is the dashboard's)
    if path == "/api/files":
        return "agents:read"  # codeck's folder picker, for an agent's cwd
    if _under(path, "/api/v1/jobs"):
        if method in READ_METHODS:
            return "jobs:read"
        return "jobs:delete" if method == "DELETE" else "jobs:write"
    if path == "/api/v1/agents/discover":
        return "agents:read"  # a search, though it is a POST (as seed 002 has it)
    if _under(path, "/api/v1/agents"):
        return "agents:read" if method in READ_METHODS else "agents:write"
    return "admin"  # /api/v1/admin/... among them


class ApiKeyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        store: ApiKeyStore,
        limiter: RateLimiter | None = None,
        required_scope: ScopeTable = required_scope,
        failures: FailureLimiter | None = None,
        links: ArtifactLinks | None = None,
    ) -> None:
        """``links``: the signer of the app's artifact links, which open without a key."""
        self.app = app
        self.links = links
        self.store = store
        self.limiter = limiter or SlidingWindowLimiter()
        self.failures = failures or FailureLimiter()
        self.required_scope = required_scope
        # Use is recorded off the request path; the set keeps the tasks alive.
        self._pending: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] not in ("http", "websocket") or path in PUBLIC_PATHS:
            await self.app(scope, receive, send)  # lifespan, or a path open to anyone
            return
        if scope["type"] == "http" and is_dashboard_path(path):
            await self.app(scope, receive, send)  # the dashboard's session cookie decides
            return
        if self._signed_link(scope, path):
            await self.app(scope, receive, send)  # a link that opens one artifact, unexpired
            return
        presented = _bearer(scope)
        if scope["type"] == "websocket":
            from_query = take_query_token(scope)
            presented = presented if presented is not None else from_query
        if presented is None:
            await _deny(
                scope, send, 401, "unauthorized",
                "an API key is required: Authorization: Bearer cb_...",
            )  # fmt: skip
            return
        try:
            checked = await check_key(self.store, self.failures, client_address(scope), presented)
        except StoreError as exc:
            # The caller is not authenticated yet: the database's details stay in the log.
            log.error(
                "cannot check an API key: %s",
                exc,
                extra={"action": "keys.verify_failed"},
            )
            await _deny(
                scope, send, 503, "unavailable",
                "API keys cannot be checked right now; retry shortly",
                retry_after=5,
            )  # fmt: skip
            return
        record = checked.record
        if record is None:
            if checked.retry_after_s:
                await _deny(
                    scope, send, 429, "rate_limited",
                    "too many unknown API keys from this address; "
                    f"retry in {checked.retry_after_s} s",
                    retry_after=checked.retry_after_s,
                )  # fmt: skip
            else:
                await _deny(scope, send, 401, "unauthorized", "the API key is unknown or revoked")
            return
        method = WEBSOCKET if scope["type"] == "websocket" else str(scope.get("method", "GET"))
        needed = self.required_scope(method, path)
        if not record.allows(needed):
            await _deny(scope, send, 403, "forbidden", f"this API key lacks the scope {needed!r}")
            return
        decision = self.limiter.check(record.id, record.rate_limit_rpm)
        if not decision.allowed:
            await _deny(
                scope, send, 429, "rate_limited",
                f"this API key allows {record.rate_limit_rpm} requests per minute; "
                f"retry in {decision.retry_after_s} s",
                retry_after=decision.retry_after_s,
                extra_headers=[
                    (b"x-ratelimit-limit", str(record.rate_limit_rpm).encode()),
                    (b"x-ratelimit-remaining", b"0"),
                ],
            )  # fmt: skip
            return
        task = asyncio.create_task(self._record_use(record.id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        scope.setdefault("state", {})["api_key"] = record
        await self.app(scope, receive, send)

    def _signed_link(self, scope: Scope, path: str) -> bool:
        """A read of an artifact, with no key, by a live signed link (``artifact_links``)."""
        return (
            self.links is not None
            and scope["type"] == "http"
            and scope.get("method") in READ_METHODS
            and _bearer(scope) is None
            and self.links.opens(path, bytes(scope.get("query_string", b"")))
        )

    async def _record_use(self, key_id: str) -> None:
        try:
            await self.store.record_use(key_id)
        except StoreError as exc:
            log.warning(
                "could not record API key use: %s; usage counts may lag",
                exc,
                extra={"action": "keys.record_use_failed"},
            )


def _bearer(scope: Scope) -> str | None:
    """The key of ``Authorization: Bearer <key>`` or of seed 002's ``X-API-Key: <key>``;
    None if absent or malformed."""
    for name, value in scope.get("headers", []):
        if name == b"x-api-key":
            key = bytes(value).decode("latin-1").strip()
            return key if key and " " not in key else None
        if name == b"authorization":
            header: str = bytes(value).decode("latin-1")
            scheme, _, token = header.strip().partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token or " " in token:
                return None
            return token
    return None


def take_query_token(scope: Scope) -> str | None:
    """The first ``token`` of the query string, removed (every one) from ``scope`` itself.

    The scope is changed in place, not copied, on purpose: the server holds the same
    dict and logs the handshake's path and query from it.
    """
    query = bytes(scope.get("query_string", b""))
    if not query:
        return None
    parts = query.split(b"&")
    kept: list[bytes] = []
    token: str | None = None
    for part in parts:
        name, _, value = part.partition(b"=")
        if unquote_plus(name.decode("latin-1")) != QUERY_TOKEN:
            kept.append(part)
        elif token is None:
            token = unquote_plus(value.decode("latin-1")).strip()
    if len(kept) != len(parts):
        scope["query_string"] = b"&".join(kept)
    return token if token and " " not in token else None


async def _deny(
    scope: Scope,
    send: Send,
    status: int,
    code: str,
    message: str,
    retry_after: int | None = None,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode()
    shaped = reshaped(str(scope.get("path", "")), status, code, message, None)
    extra: dict[str, str] = {}
    if shaped is not None:
        status, body, extra = shaped
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers.extend((name.encode(), value.encode()) for name, value in extra.items())
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="claybot"'))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    headers.extend(extra_headers or [])
    if scope["type"] == "websocket":
        if "websocket.http.response" in scope.get("extensions", {}):
            # The server can answer the handshake with a real HTTP status and body.
            prefix = "websocket.http.response"
        else:
            # Refusing the handshake is all the protocol offers; the code carries the status.
            await send({"type": "websocket.close", "code": 4000 + status, "reason": code})
            return
    else:
        prefix = "http.response"
    await send({"type": f"{prefix}.start", "status": status, "headers": headers})
    await send({"type": f"{prefix}.body", "body": body})
