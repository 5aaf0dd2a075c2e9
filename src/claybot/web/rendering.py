"""How the dashboard's pages are made: the templates, their filters, the headers every
answer carries, and the redirect to the login page."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from claybot.api.file_answer import INLINE_TYPES

HERE = Path(__file__).parent
STATIC = HERE / "static"
templates = Jinja2Templates(directory=HERE / "templates")


def _utc(unix_ms: object) -> str:
    """A record's or an agent's time (unix milliseconds) as UTC, to the second."""
    if not isinstance(unix_ms, int | float):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(unix_ms / 1000))


def _iso(unix_ms: object) -> str:
    """Unix milliseconds as ISO 8601 UTC, for ``<time datetime>``."""
    if not isinstance(unix_ms, int | float):
        return ""
    return datetime.fromtimestamp(unix_ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _size(size: object) -> str:
    """A file's size as people read it: 512 B, 1.5 kB, 20.0 MB."""
    if not isinstance(size, int | float):
        return ""
    for unit in ("B", "kB", "MB"):
        if size < 1000:
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


templates.env.filters["utc"] = _utc
templates.env.filters["iso"] = _iso
templates.env.filters["size"] = _size
# Files a history card shows as images (what ``/files/{id}`` serves inline).
templates.env.globals["inline_types"] = INLINE_TYPES
# How a history record's type reads on its card.
templates.env.globals["kinds"] = {
    "user_message": "Message",
    "assistant_message": "Reply",
    "tool_result": "Tool result",
    "reset": "Reset",
    "start": "Start",
    "note": "Note",
    "damaged": "Damaged line",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


def see_other(path: str) -> RedirectResponse:
    """After a form: the page to show next (303, so a reload does not post again)."""
    response = RedirectResponse(path, status_code=303)
    response.headers.update(SECURITY_HEADERS)
    return response


# Sent by the pages' script when it posts a form itself: it wants no page back.
FETCH_HEADER = "x-claybot-fetch"


def done(request: Request, path: str) -> Response:
    """After a form: the page to show next, or only "done" (204) to the script that
    posted it and updates the page in place."""
    if request.headers.get(FETCH_HEADER) == "1":
        return Response(status_code=204, headers=SECURITY_HEADERS)
    return see_other(path)


def to_login() -> RedirectResponse:
    return see_other("/login")
