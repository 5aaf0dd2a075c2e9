"""Images a user message carries, as a vision model takes them: base64 of the bytes.

Read when a message is first encoded for a provider (``encoded.py`` keeps the result
for the calls after). An image that is gone from the agent's folder, or is larger than
the vendor takes, is left out of the parts: the message's text still names the file.
"""

from __future__ import annotations

import base64
from pathlib import Path

from claybot.providers.base import Attachment, ImageType, UserMessage, is_image_type


def image_parts(message: UserMessage, max_bytes: int) -> list[tuple[ImageType, str]]:
    """The message's images as (MIME type, base64 data), those that can be sent."""
    parts: list[tuple[ImageType, str]] = []
    for attachment in message.files:
        mime_type = attachment.mime_type
        if is_image_type(mime_type) and (data := _read(attachment, max_bytes)) is not None:
            parts.append((mime_type, base64.b64encode(data).decode("ascii")))
    return parts


def _read(attachment: Attachment, max_bytes: int) -> bytes | None:
    if not attachment.is_image or attachment.size > max_bytes:
        return None
    try:
        data = Path(attachment.path).read_bytes()
    except OSError:
        return None
    return data if len(data) <= max_bytes else None
