"""Context messages encoded once for a vendor, and reused on every later call.

A provider turns each message of the context into the JSON its vendor takes. The
context only grows between calls (and is cut at the front), so what a message
encodes to does not change: an agent's context keeps each encoding (``PackedContext``,
per ``MessageCodec.key``) and a call encodes only the messages that are new since the
last one. A provider asks through ``encoded_messages``; a plain list of messages (a
job's transcript, a test's request) is encoded whole, each time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from claybot.providers.base import ChatMessage, UserMessage


class MessageCodec(Protocol):
    """How one vendor's format encodes a message: a kind (one byte, the vendor's own
    meaning) and the message's JSON fragment. ``key`` names the format: every codec
    with the same key must encode alike, since they share the kept encodings."""

    @property
    def key(self) -> str: ...

    def encode(self, message: ChatMessage) -> tuple[int, bytes]: ...


@dataclass(frozen=True, slots=True)
class EncodedRun:
    """Messages' fragments back to back in ``data``; message ``i`` is
    ``data[ends[i - 1] - start : ends[i] - start]`` (``start`` for ``i == 0``), its
    kind ``kinds[i]``. ``ends`` count from the start of a larger buffer, hence
    ``start``: slicing them all would cost a copy per call."""

    data: bytes
    ends: Sequence[int]
    kinds: bytes
    start: int = 0

    def __len__(self) -> int:
        return len(self.kinds)

    def fragments(self) -> list[tuple[int, bytes]]:
        """Each message's kind and fragment (a copy of each: for formats that regroup)."""
        data, start, previous = self.data, self.start, 0
        pieces = []
        for kind, end in zip(self.kinds, self.ends, strict=True):
            stop = end - start
            pieces.append((kind, data[previous:stop]))
            previous = stop
        return pieces


@runtime_checkable
class EncodableMessages(Protocol):
    """Messages that keep their encodings (an agent's context window)."""

    def encoded(self, codec: MessageCodec) -> EncodedRun: ...

    def files_to_encode(self, codec: MessageCodec) -> bool: ...


def encode_messages(codec: MessageCodec, messages: Sequence[ChatMessage]) -> EncodedRun:
    """Every message encoded now (nothing kept)."""
    data = bytearray()
    ends: list[int] = []
    kinds = bytearray()
    for message in messages:
        kind, fragment = codec.encode(message)
        data += fragment
        ends.append(len(data))
        kinds.append(kind)
    return EncodedRun(bytes(data), ends, bytes(kinds))


def files_to_encode(messages: Sequence[ChatMessage], codec: MessageCodec) -> bool:
    """Whether encoding ``messages`` reads files (images), which a provider does on a
    worker thread rather than the event loop: true only until the context keeps them."""
    if isinstance(messages, EncodableMessages):
        return messages.files_to_encode(codec)
    return any(isinstance(message, UserMessage) and message.files for message in messages)


def encoded_messages(messages: Sequence[ChatMessage], codec: MessageCodec) -> EncodedRun:
    """The messages in ``codec``'s format: from the context's kept encodings when it
    keeps them, else encoded now."""
    if isinstance(messages, EncodableMessages):
        return messages.encoded(codec)
    return encode_messages(codec, messages)
