"""The OpenAI-compatible door's images: a new message's ``image_url`` parts, decoded and
stored in the file store, so the message carries them as an upload's files.

Each is checked before anything is stored: valid base64, an image by its content (what
the data URL says is not trusted), each under ``files.maxFileBytes`` and all together
under ``files.maxMessageBytes`` (413, the part named as ``param``). Decoding megabytes
of base64 and writing them durably runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Sequence

from claybot.api.openai.conversation import ImagePart, UnsupportedContent
from claybot.files.reference import FileReference
from claybot.files.sniff import sniff
from claybot.files.store import FileStore, FileTooLarge
from claybot.kernel.errors import ClayError


async def store_images(store: FileStore, images: Sequence[ImagePart]) -> tuple[FileReference, ...]:
    if not images:
        return ()
    return await asyncio.to_thread(_store_all, store, images)


def _store_all(store: FileStore, images: Sequence[ImagePart]) -> tuple[FileReference, ...]:
    decoded = [(image, _decoded(store, image)) for image in images]
    store.check_message(len(data) for _, data in decoded)
    stored = []
    for image, data in decoded:
        try:
            stored.append(store.put(data, image.name))
        except ClayError as exc:  # over the quota
            exc.field = image.field
            raise
    return tuple(stored)


def _decoded(store: FileStore, image: ImagePart) -> bytes:
    limit = store.settings.max_file_bytes
    if len(image.base64) // 4 * 3 > limit + 2:  # refused before it is decoded
        raise FileTooLarge(
            f"{image.field} is over {limit} bytes (files.maxFileBytes)", field=image.field
        )
    try:
        data = base64.b64decode(image.base64, validate=True)
    except (binascii.Error, ValueError):
        raise UnsupportedContent(f"{image.field} is not valid base64", field=image.field) from None
    if len(data) > limit:
        raise FileTooLarge(
            f"{image.field} is {len(data)} bytes; the limit is {limit} (files.maxFileBytes)",
            field=image.field,
        )
    kind = sniff(data)
    if not kind.startswith("image/"):
        raise UnsupportedContent(
            f"{image.field} is not an image: its content is {kind}", field=image.field
        )
    return data
