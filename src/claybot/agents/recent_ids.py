"""The message ids an agent saw last, kept to answer a retried post as a duplicate.

An ordered dict of up to 4,096 id strings per agent cost a loaded agent about 100
bytes an id in small objects (4.7 MB for 1,000 agents with 50 messages each), which
CPython's allocator keeps after the agents unload. Here an id is an 8-byte
fingerprint in one buffer, used as a ring: the oldest is overwritten once it is
full. The fingerprint is the string's own hash (computed once per string and
cached by Python), so the set is rebuilt from history at each load, never stored.
Two of an agent's last 4,096 ids share a 64-bit fingerprint with odds of about one
in 10^12.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_MASK = 2**64 - 1
_WIDTH = 8
_FORGOTTEN = bytes(_WIDTH)  # no fingerprint is 0 (see _fingerprint)


def _fingerprint(message_id: str) -> bytes:
    return ((hash(message_id) & _MASK) or 1).to_bytes(_WIDTH, sys.byteorder)


class RecentIds:
    __slots__ = ("_data", "_limit", "_next")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()
        self._next = 0  # the slot the next id takes once the ring is full

    def __contains__(self, message_id: object) -> bool:
        return isinstance(message_id, str) and self._find(_fingerprint(message_id)) != -1

    def add(self, message_id: str) -> bool:
        """Remember ``message_id``; False if it was remembered already (one look, not
        two: every accepted message asks this)."""
        fingerprint = _fingerprint(message_id)
        if self._find(fingerprint) != -1:
            return False
        if len(self._data) < self._limit * _WIDTH:
            self._data += fingerprint
            return True
        at = self._next * _WIDTH
        self._data[at : at + _WIDTH] = fingerprint
        self._next = (self._next + 1) % self._limit
        return True

    def fill(self, message_ids: Sequence[str]) -> None:
        """Remember the ids history holds, oldest first, into an empty ring: written
        straight in, without looking each one up first (4,096 lookups over the ring
        cost an agent's load 20 ms). An id that is there twice takes two slots."""
        if self._data:
            raise ValueError("fill() loads an empty ring; add() the ids to one in use")
        kept = message_ids[-self._limit :]
        self._data = bytearray(b"".join(map(_fingerprint, kept)))
        self._next = 0  # full or not, slot 0 holds the oldest

    def discard(self, message_id: str) -> None:
        at = self._find(_fingerprint(message_id))
        if at != -1:
            self._data[at : at + _WIDTH] = _FORGOTTEN

    def _find(self, fingerprint: bytes) -> int:
        """The offset of ``fingerprint`` in the ring, or -1 (a match must be aligned)."""
        data = self._data
        at = data.find(fingerprint)
        while at != -1 and at % _WIDTH:
            at = data.find(fingerprint, at + 1)
        return at
