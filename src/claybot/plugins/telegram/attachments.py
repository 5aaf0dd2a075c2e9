"""Which file a Telegram message carries, and how a file goes back (pure).

In: a photo (its largest size), a document, a voice note or an audio file. Telegram
sends one of them per message at most; anything else (a sticker, a video, a
location) is not read. The name is only what the file is called in the agent's
folder: the store types a file by its content, never by its name.

Out: an image Telegram shows as a photo goes by ``sendPhoto`` (a JPEG, PNG or WebP
of at most 10 MB); everything else, GIFs included (Telegram turns a GIF document
into an animation, where ``sendPhoto`` would keep only its first frame), by
``sendDocument``. A caption holds 1024 characters; the rest of the text follows
as a message of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from telegram import Message

from claybot.plugins.telegram.split import split_markdown

# Telegram's own limit on what a bot may download (getFile), whatever ours says.
TELEGRAM_DOWNLOAD_LIMIT_BYTES = 20 * 1024**2
PHOTO_LIMIT_BYTES = 10 * 1024**2  # sendPhoto's; a larger image goes as a document
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
CAPTION_LIMIT = 1024

AttachmentKind = Literal["photo", "document", "voice", "audio"]
UploadKind = Literal["photo", "document"]


@dataclass(frozen=True)
class Attachment:
    kind: AttachmentKind
    file_id: str
    name: str
    size: int | None  # as Telegram reports it; None when it does not say


def attachment_of(message: Message) -> Attachment | None:
    """The file ``message`` carries, if it is one we read."""
    if message.photo:
        largest = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        return Attachment(
            "photo", largest.file_id, f"photo-{largest.file_unique_id}.jpg", largest.file_size
        )
    if message.document is not None:
        document = message.document
        name = document.file_name or f"document-{document.file_unique_id}"
        return Attachment("document", document.file_id, name, document.file_size)
    if message.voice is not None:
        voice = message.voice
        # Voice notes are OGG/Opus.
        return Attachment(
            "voice", voice.file_id, f"voice-{voice.file_unique_id}.ogg", voice.file_size
        )
    if message.audio is not None:
        audio = message.audio
        name = audio.file_name or f"audio-{audio.file_unique_id}"
        return Attachment("audio", audio.file_id, name, audio.file_size)
    return None


def upload_kind(mime_type: str, size: int) -> UploadKind:
    if mime_type in PHOTO_TYPES and size <= PHOTO_LIMIT_BYTES:
        return "photo"
    return "document"


def caption_and_rest(text: str, render: Callable[[str], str]) -> tuple[str | None, str]:
    """The part of ``text`` that fits a caption (None for no text) and what follows it."""
    if not text.strip():
        return None, ""
    chunks = split_markdown(text, render, limit=CAPTION_LIMIT)
    if not chunks:
        return None, ""
    return chunks[0], "\n\n".join(chunks[1:])


def size_text(size: int) -> str:
    """A size as people read it: 512 bytes, 3.2 MB."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024**2:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024**2:.1f} MB"
