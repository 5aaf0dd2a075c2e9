"""Files that come with requests: an upload stored, the files a message names looked up."""

from __future__ import annotations

import asyncio

from starlette.datastructures import FormData, UploadFile  # FastAPI's is a subclass

from claybot.files.reference import FileReference, safe_name
from claybot.files.store import FileStore, FileTooLarge
from claybot.wire.bodies import AttachFile


async def read_upload(store: FileStore, upload: UploadFile) -> FileReference:
    """An uploaded file, stored (413 past ``files.maxFileBytes`` without reading it all)."""
    cap = store.settings.max_file_bytes
    data = await upload.read(cap + 1)
    name = safe_name(upload.filename or "file")
    if len(data) > cap:
        raise FileTooLarge(f"{name!r} is over {cap} bytes (files.maxFileBytes)", field="file")
    return await asyncio.to_thread(store.put, data, name)


def chosen_files(form: FormData, field: str) -> list[UploadFile]:
    """The files a form's field carries. A browser sends a file field left empty as a
    part with an empty file name and no bytes: that is no file, whoever sends it."""
    return [
        part
        for part in form.getlist(field)
        if isinstance(part, UploadFile) and (part.filename or part.size)
    ]


async def attached(store: FileStore, files: list[AttachFile]) -> tuple[FileReference, ...]:
    """The stored files a message names, checked together against the message cap."""
    if not files:
        return ()

    def look_up() -> tuple[FileReference, ...]:
        found = tuple(store.reference(file.id, file.name or "file") for file in files)
        store.check_message(file.size for file in found)
        return found

    return await asyncio.to_thread(look_up)
