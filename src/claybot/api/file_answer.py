"""A stored file as the browser should get it, for the API's ``/v1/engine/files/{id}``
and the dashboard's ``/files/{id}`` alike."""

from __future__ import annotations

import asyncio

from fastapi.responses import FileResponse

from claybot.files.store import FileStore

# Shown in the browser (an image in a history card); anything else is a download, so
# that no stored page or script ever runs on the engine's origin.
INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


async def serve_file(store: FileStore, file_id: str, name: str | None) -> FileResponse:
    """An image inline, anything else as a download, never sniffed into a page and
    sandboxed if opened (FileNotFound: 404)."""
    reference = await asyncio.to_thread(store.reference, file_id, name or file_id[:12])
    inline = reference.mimeType in INLINE_TYPES
    return FileResponse(
        store.path_of(file_id),
        media_type=reference.mimeType if inline else "application/octet-stream",
        filename=reference.name,
        content_disposition_type="inline" if inline else "attachment",
        headers={"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"},
    )
