"""A file as a message carries it: which content, under which name, of which type."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SHA256 = re.compile(r"^[0-9a-f]{64}$")
UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]")
NAME_MAX = 255


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

    def to_dict(self) -> dict[str, Any]:
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
    """A name to show and to save under: no folders, no control characters."""
    name = UNSAFE_NAME.sub("_", name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).strip()
    if name in ("", ".", ".."):
        return "file"
    return name[:NAME_MAX]
