"""The files of the dashboard's conversations: ``/files/{id}``, behind its session.

The answer is the API's (``api/file_answer.py``): an image inline, anything else a download,
``nosniff`` and sandboxed, so a stored page or script never runs on the engine's origin.
A history card's image (``<img src="/files/{id}">``) is one of these.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from claybot.api.deps import FilesDep
from claybot.api.file_answer import serve_file
from claybot.files.store import FileNotFound
from claybot.web.rendering import page
from claybot.web.routes import guard

router = APIRouter(include_in_schema=False)
# A file's bytes never change under its id (its SHA-256): the browser may keep it.
CACHE_CONTROL = "private, max-age=86400, immutable"


@router.get("/files/{file_id}")
async def stored_file(
    request: Request,
    files: FilesDep,
    file_id: str,
    name: Annotated[str | None, Query(max_length=255)] = None,
) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    try:
        answer = await serve_file(files, file_id, name)
    except FileNotFound:
        return page(request, "not_found.html", status_code=404, session=session,
                    what=file_id, back="/chat", back_label="Chat")  # fmt: skip
    answer.headers.update(
        {
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": CACHE_CONTROL,
        }
    )
    return answer
