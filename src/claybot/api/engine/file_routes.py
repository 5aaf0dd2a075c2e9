"""Files for conversations: store one (multipart), then a message carries its id; fetch
one back. The socket is the owner's; on TCP these need ``admin`` (``tcp_auth``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, UploadFile
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from claybot.api.deps import FilesDep
from claybot.api.file_answer import serve_file
from claybot.api.responses import errors
from claybot.api.uploads import read_upload
from claybot.wire.base import AnswerRoute
from claybot.wire.files import StoredFile

FILES_PATH = "/v1/engine/files"


class FileUpload(BaseModel):
    """The upload's form: its one part, the file (any other part is refused, 422)."""

    model_config = ConfigDict(extra="forbid")
    file: UploadFile = Field(description="The file")


router = APIRouter(prefix=FILES_PATH, route_class=AnswerRoute)


@router.post(
    "",
    status_code=201,
    summary="Store a file for a message (multipart); the answer's id goes in `files`",
    responses=errors(400, 413, 422),
)
async def upload(
    files: FilesDep, form: Annotated[FileUpload, Form(media_type="multipart/form-data")]
) -> StoredFile:
    stored = await read_upload(files, form.file)
    return StoredFile.model_validate({"ok": True, "file": stored.to_dict()})


@router.get(
    "/{fileId}",
    summary="A stored file's bytes (images inline, anything else as a download)",
    response_class=FileResponse,
    responses={
        200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}}},
        **errors(404, 422),
    },
)
async def download(
    files: FilesDep,
    fileId: str,
    name: Annotated[str | None, Query(max_length=255)] = None,
) -> FileResponse:
    return await serve_file(files, fileId, name)
