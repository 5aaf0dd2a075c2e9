"""Server-sent events framing: every SSE stream the engine writes frames its events here.

A frame is its fields (``id``, ``event``, one ``data`` line per line of the data), each
ended by the stream's line end, and an empty line. The event bus frames with CRLF, as
sse-starlette does (``tests/kernel`` holds the bus's frames to sse-starlette's); the
OpenAI door, the job log and the dashboard's live view with LF, which their clients
have always read (OpenAI's SDKs among them). Both are SSE; the line end is kept per
stream so that no client sees a byte change.

Not sse-starlette's ``ServerSentEvent``: it is a dev dependency only, and the bus
frames every event it emits, where this function costs a fraction of a microsecond.
"""

from __future__ import annotations

import re

CRLF = b"\r\n"
LF = b"\n"
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def sse_frame(
    data: bytes, *, event: str | None = None, id: int | None = None, eol: bytes = CRLF
) -> bytes:
    """One event: ``id`` and ``event`` when given, then ``data``, then an empty line.

    One formatting per shape of frame: the bus frames every event it emits, and this
    costs it about as much as the one literal it replaced."""
    if 10 in data or 13 in data:  # a line break in the data: each line is a field of its own
        data = (b"%bdata: " % eol).join(_LINE_BREAK.split(data))
    if id is None:
        if event is None:
            return b"data: %b%b%b" % (data, eol, eol)
        return b"event: %b%bdata: %b%b%b" % (event.encode(), eol, data, eol, eol)
    if event is None:
        return b"id: %d%bdata: %b%b%b" % (id, eol, data, eol, eol)
    return b"id: %d%bevent: %b%bdata: %b%b%b" % (id, eol, event.encode(), eol, data, eol, eol)


def sse_comment(text: str, *, eol: bytes = CRLF) -> bytes:
    """A comment line, which readers skip: keeps proxies from closing a quiet stream."""
    return b": %b%b%b" % (text.encode(), eol, eol)
