"""Answers of the file routes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from claybot.wire.base import Ok


class FileInfo(BaseModel):
    """Seed 001's ``FileReference``: ``id`` is the content's SHA-256 (the same bytes are
    one file), ``mimeType`` is sniffed from the content."""

    model_config = ConfigDict(strict=True, extra="allow")
    id: str
    name: str
    mimeType: str
    size: int = Field(ge=0)
    sha256: str


class StoredFile(Ok):
    file: FileInfo
