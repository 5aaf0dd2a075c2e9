"""A file as a message carries it: which content, under which name, of which type."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from claybot.kernel.event_types import FileReferenceJson

SHA256 = re.compile(r"^[0-9a-f]{64}$")
UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]")
# What Linux, macOS and Windows file systems take as one name: 255 bytes (of UTF-8).
NAME_MAX_BYTES = 255
# An extension longer than this is no extension worth keeping when a name is cut.
EXTENSION_MAX_BYTES = 16


@dataclass(frozen=True, slots=True)
class FileReference:
    """Seed 001's ``FileReference``. ``id`` is the content's SHA-256: the same bytes
    are one file however often they are sent; ``name`` is what the sender called it;
    ``mimeType`` is what the content is (sniffed, never taken from the name)."""

    id: str
    name: str
    mimeType: str
    size: int

    @property
    def sha256(self) -> str:
        return self.id

    @property
    def is_image(self) -> bool:
        return self.mimeType.startswith("image/")

    def to_dict(self) -> FileReferenceJson:
        return {"id": self.id, "name": self.name, "mimeType": self.mimeType,
                "size": self.size, "sha256": self.id}  # fmt: skip

    @staticmethod
    def from_dict(data: dict[str, Any]) -> FileReference:
        file_id = str(data["id"])
        if not SHA256.match(file_id):
            raise ValueError(f"not a file id: {file_id!r}")
        return FileReference(
            file_id, safe_name(str(data.get("name") or "")), str(data["mimeType"]),
            int(data["size"]),
        )  # fmt: skip


def safe_name(name: str) -> str:
    """A name to show and to save under: no folders, no control characters, and at
    most ``NAME_MAX_BYTES`` bytes (cut before its extension)."""
    name = UNSAFE_NAME.sub("_", name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).strip()
    if name in ("", ".", ".."):
        return "file"
    return fit_name(name, NAME_MAX_BYTES)


def fit_name(name: str, max_bytes: int) -> str:
    """``name`` in at most ``max_bytes`` bytes of UTF-8: the part before its extension
    is cut (never inside a character), the extension kept."""
    if len(name.encode()) <= max_bytes:
        return name
    stem, dot, extension = name.rpartition(".")
    if dot and stem and len(extension.encode()) < EXTENSION_MAX_BYTES:
        suffix = f".{extension}"
    else:
        stem, suffix = name, ""
    room = max_bytes - len(suffix.encode())
    return stem.encode()[:room].decode(errors="ignore") + suffix
