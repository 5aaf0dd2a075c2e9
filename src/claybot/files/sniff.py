"""What a file is, by its content: a name ending in ``.png`` does not make it an image."""

from __future__ import annotations

import filetype

TEXT_PROBE = 8192  # bytes looked at to call a file text


def sniff(data: bytes) -> str:
    """The MIME type the content's first bytes show (``filetype``'s signatures:
    images, audio, video, archives, documents, executables); UTF-8 without NUL bytes is
    ``text/plain``; anything else ``application/octet-stream``."""
    kind = filetype.guess_mime(data[: TEXT_PROBE * 32])
    if kind:
        return str(kind)
    probe = data[:TEXT_PROBE]
    if b"\x00" not in probe:
        try:
            probe.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(probe) - 4:  # not just a character cut at the probe's end
                return "application/octet-stream"
        return "text/plain"
    return "application/octet-stream"
