"""The Unix socket refuses writes that a web proxy relays onto it.

The socket is the owner's, and trusted: whatever reaches it may change anything.
The original ClayBot dashboard (seed 000's) reaches it through a catch-all route of
its web server that passes every request for ``/api/*``, of any method, on to the
socket, and that web server listens on every interface with no login. Anyone who can
reach its port could then set credentials, load plugins, mint API keys or stop the
engine. That dashboard only reads (GET, and its event stream), so here a request that
carries what a browser or a proxy adds (``X-Forwarded-*``, ``Forwarded``, ``Origin``,
``Sec-Fetch-*``) may read and nothing more: anything else is refused, 403, before
the app sees it. ClayBot's own clients send none of these headers; a client that
writes from elsewhere uses TCP and an API key.
"""

from __future__ import annotations

import json
import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from claybot.api.error_shapes import reshaped

log = logging.getLogger(__name__)

READS = frozenset({"GET", "HEAD"})
RELAY_HEADERS = frozenset(
    {
        b"forwarded",
        b"origin",
        b"sec-fetch-mode",
        b"sec-fetch-site",
        b"x-forwarded-for",
        b"x-forwarded-host",
        b"x-forwarded-proto",
    }
)
CODE = "relayed_write_refused"
MESSAGE = (
    "this request reached the engine's socket through a web proxy (it carries "
    "X-Forwarded-*, Origin or Sec-Fetch-* headers): such requests may only read. Make "
    "changes with the claybot CLI, or over TCP with an API key"
)


def relayed(scope: Scope) -> bool:
    return any(name in RELAY_HEADERS for name, _ in scope.get("headers", ()))


class RelayedWritesRefused:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READS or not relayed(scope):
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        log.warning(
            "refused %s %s relayed onto the socket by a web proxy",
            scope["method"],
            path,
            extra={"action": "socket.relayed_write_refused", "path": path},
        )
        status = 403
        body = json.dumps({"ok": False, "error": {"code": CODE, "message": MESSAGE}}).encode()
        extra: dict[str, str] = {}
        shaped = reshaped(path, status, CODE, MESSAGE, None)
        if shaped is not None:
            status, body, extra = shaped
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((name.encode(), value.encode()) for name, value in extra.items()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
