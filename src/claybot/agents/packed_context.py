"""An agent's inference context, packed into one buffer.

A loaded agent keeps its context (up to twice ``maxContextMessages``) between turns.
Held as message objects, 1,000 busy agents with 100 short messages each put
about 20 MB of small objects into CPython's allocator, which returns a 1 MB arena to
the system only once every object in it is free. The few objects that outlive a
load (index entries of new agents, a connection's last request) are spread over all
the arenas the load needed, so that memory stayed with the process after every
agent unloaded. Packed, a context is three buffers: the messages as JSON entries
back to back, their end offsets, and a role letter each: a few large allocations
that go back to the system when the agent unloads. With this, compact recent ids
(``recent_ids.py``) and recency in arrays (``directory.py``), the engine's RSS after
50,000 messages to 1,000 agents and an idle unload went from 142 MB to 125 MB, against
108 MB at boot (``bench/agents.py --memory``).

Messages are decoded when a provider reads them (``ContextWindow``). The scripted
provider reads one. A vendor's provider asks instead for the window in its own format
(``ContextWindow.encoded``): the context keeps each message's encoding per format,
packed the same way, and encodes only the messages appended since the last call, so
a call's cost no longer grows with the context (decoding and encoding 1,000 messages
took 5-8 ms of the event loop on every call). Appending encodes one message (0.4 us);
a window of 200 messages is taken in about 7 us.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import msgspec

from claybot.providers.base import ChatMessage, UserMessage
from claybot.providers.encoded import EncodedRun, MessageCodec, encode_messages

_ROLE_LETTERS = {"user": ord("u"), "assistant": ord("a"), "tool": ord("t")}
_USER = b"u"
# Each message as its compact JSON array (the structs are array-like): its role, then
# its fields in order.
_ENCODER = msgspec.json.Encoder()
_DECODER: msgspec.json.Decoder[ChatMessage] = msgspec.json.Decoder(ChatMessage)


def _encode(message: ChatMessage) -> bytes:
    return _ENCODER.encode(message)


def _decode(entry: memoryview) -> ChatMessage:
    return _DECODER.decode(entry)


def _has_files(message: ChatMessage) -> bool:
    return isinstance(message, UserMessage) and bool(message.files)


class ContextWindow(Sequence[ChatMessage]):
    """A run of packed messages, decoded on access (a new object each time).

    It shares the context's buffer rather than copying it: the context only ever
    appends to its buffer, and trimming or clearing gives it a new one, so the bytes a
    window covers never change."""

    __slots__ = ("_base", "_context", "_data", "_ends", "_first", "_generation", "_last")

    def __init__(
        self,
        data: bytearray,
        ends: array[int],
        base: int,
        last: ChatMessage | None,
        context: PackedContext | None = None,
        first: int = 0,
    ) -> None:
        self._data = data
        self._ends = ends  # the end offset of each entry in ``data``
        self._base = base  # where the first entry starts
        # The last entry as it was appended: what a provider looks at first, undecoded.
        self._last = last if ends else None
        # Where the kept encodings are: the context, this window's first message there,
        # and the context's generation then (a trim or clear since makes them another's).
        self._context = context
        self._first = first
        self._generation = context.generation if context is not None else 0

    def files_to_encode(self, codec: MessageCodec) -> bool:
        """Whether ``encoded(codec)`` would have files to read (not kept yet)."""
        context = self._context
        if context is None or context.generation != self._generation:
            return any(map(_has_files, self))
        return context.files_to_encode(codec, self._first, self._first + len(self))

    def encoded(self, codec: MessageCodec) -> EncodedRun:
        """These messages in ``codec``'s format, from the context's kept encodings."""
        context = self._context
        if context is None or context.generation != self._generation:
            return encode_messages(codec, self)
        return context.encoded(codec, self._first, self._first + len(self))

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> ChatMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[ChatMessage]: ...

    def __getitem__(self, index: int | slice) -> ChatMessage | list[ChatMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        ends = self._ends
        if index < 0:
            index += len(ends)
        if not 0 <= index < len(ends):
            raise IndexError("context index out of range")
        if index == len(ends) - 1 and self._last is not None:
            return self._last
        start = ends[index - 1] if index else self._base
        # A memoryview for this read only: held longer, it would stop the buffer growing.
        with memoryview(self._data) as view:
            return _decode(view[start : ends[index]])

    def __iter__(self) -> Iterator[ChatMessage]:
        start = self._base
        for end in self._ends:
            with memoryview(self._data) as view:
                message = _decode(view[start:end])
            yield message
            start = end

    def __reversed__(self) -> Iterator[ChatMessage]:
        for index in range(len(self._ends) - 1, -1, -1):
            yield self[index]

    def __repr__(self) -> str:
        return f"ContextWindow({len(self)} messages)"


class _KeptEncoding:
    """One format's encodings of the context's messages ``base`` on, packed as the
    context is: the fragments back to back, their end offsets, a kind byte each."""

    __slots__ = ("base", "data", "ends", "kinds")

    def __init__(self, base: int) -> None:
        self.base = base
        self.data = bytearray()
        self.ends: array[int] = array("Q")
        self.kinds = bytearray()

    def cut(self, first: int) -> _KeptEncoding | None:
        """What is kept once the context drops its messages before ``first``."""
        if self.base >= first:
            self.base -= first
            return self
        drop = first - self.base
        if drop >= len(self.ends):
            return None
        offset = self.ends[drop - 1]
        kept = _KeptEncoding(0)
        kept.data = self.data[offset:]
        kept.ends = array("Q", [end - offset for end in self.ends[drop:]])
        kept.kinds = self.kinds[drop:]
        return kept


class PackedContext:
    """The context since the last reset: append at the end, read a window of the last
    messages, and trim what is beyond it (it lives on in history)."""

    __slots__ = ("_data", "_encodings", "_ends", "_files", "_last", "_roles", "generation")

    def __init__(self, messages: Iterable[ChatMessage] = ()) -> None:
        self._data = bytearray()
        self._ends: array[int] = array("Q")
        self._roles = bytearray()
        self._files = bytearray()  # 1 for a message that carries files, else 0
        self._last: ChatMessage | None = None
        self._encodings: dict[str, _KeptEncoding] = {}  # by ``MessageCodec.key``
        self.generation = 0  # counts trims and clears: how windows know theirs is gone
        self.extend(messages)

    def __len__(self) -> int:
        return len(self._ends)

    def __iter__(self) -> Iterator[ChatMessage]:
        return iter(self.window(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedContext):
            return NotImplemented
        return self._data == other._data and self._ends == other._ends

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"PackedContext({len(self)} messages, {len(self._data)} bytes)"

    def append(self, message: ChatMessage) -> None:
        self._data += _encode(message)
        self._ends.append(len(self._data))
        self._roles.append(_ROLE_LETTERS[message.role])
        self._files.append(1 if _has_files(message) else 0)
        self._last = message

    def extend(self, messages: Iterable[ChatMessage]) -> None:
        for message in messages:
            self.append(message)

    def clear(self) -> None:
        # New buffers rather than emptied ones: the old ones go back to the system.
        self._data = bytearray()
        self._ends = array("Q")
        self._roles = bytearray()
        self._files = bytearray()
        self._last = None
        self._encodings = {}
        self.generation += 1

    def window(self, limit: int) -> ContextWindow:
        """The last ``limit`` messages, starting at a user message: starting mid-exchange
        would hand the model a tool result without the call that produced it, which
        vendors reject. It stays as it was taken while the context goes on."""
        first = self._window_start(limit)
        base = self._ends[first - 1] if first else 0
        return ContextWindow(self._data, self._ends[first:], base, self._last, self, first)

    def trim(self, limit: int) -> None:
        """Keep only ``window(limit)``."""
        first = self._window_start(limit)
        if not first:
            return
        offset = self._ends[first - 1]
        self._data = self._data[offset:]
        self._ends = array("Q", [end - offset for end in self._ends[first:]])
        self._roles = self._roles[first:]
        self._files = self._files[first:]
        encodings = {key: kept.cut(first) for key, kept in self._encodings.items()}
        self._encodings = {key: kept for key, kept in encodings.items() if kept is not None}
        self.generation += 1

    def files_to_encode(self, codec: MessageCodec, first: int, end: int) -> bool:
        """Whether encoding messages ``first`` to ``end`` would read files (images to
        encode): a provider then encodes off the event loop."""
        kept = self._encodings.get(codec.key)
        start = first
        if kept is not None and kept.base <= first <= kept.base + len(kept.ends):
            start = max(first, kept.base + len(kept.ends))
        return 1 in self._files[start:end]

    def encoded(self, codec: MessageCodec, first: int, end: int) -> EncodedRun:
        """Messages ``first`` to ``end`` (not included) in ``codec``'s format: those
        encoded before are taken as they are, the rest encoded now and kept."""
        kept = self._encodings.get(codec.key)
        if kept is None or not kept.base <= first <= kept.base + len(kept.ends):
            kept = self._encodings[codec.key] = _KeptEncoding(first)
        index = kept.base + len(kept.ends)
        if index < end:
            ends = self._ends
            start = ends[index - 1] if index else 0
            with memoryview(self._data) as view:
                for position in range(index, end):
                    stop = ends[position]
                    kind, fragment = codec.encode(_decode(view[start:stop]))
                    start = stop
                    kept.data += fragment
                    kept.ends.append(len(kept.data))
                    kept.kinds.append(kind)
        low, high = first - kept.base, end - kept.base
        start = kept.ends[low - 1] if low else 0
        stop = kept.ends[high - 1] if high > low else start
        with memoryview(kept.data) as view:
            data = bytes(view[start:stop])
        return EncodedRun(data, kept.ends[low:high], bytes(kept.kinds[low:high]), start)

    def _window_start(self, limit: int) -> int:
        count = len(self._ends)
        if count <= limit:
            return 0
        first = self._roles.find(_USER, count - limit)
        return count if first == -1 else first
