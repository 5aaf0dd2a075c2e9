"""Giving memory back to the operating system after a large unload.

When hundreds of agents are unloaded at once their contexts are freed, but the
process's resident memory stays where the load left it until two things happen:

- a full garbage collection frees what only reference cycles still hold: an event
  stream that ended leaves its last writes' bytes (up to 256 KB each) in cycles, and
  200 readers that left after 2,000 messages kept 20-45 MB of the C heap that way
  until a full collection came by itself (the engine paces the collector slowly:
  ``kernel/collector.py``);
- glibc's ``malloc_trim`` hands the heap's free pages back.

Together they cost 15-25 ms, so they run only after an unload large enough to have
freed much (``agents/residency.py``). Where the C library has no ``malloc_trim``
(musl, macOS) only the collection runs.

CPython's small-object allocator keeps its arenas (1 MiB) until every object in one
is freed; what is left above boot after a load is mostly such arenas, pinned by the
few objects a load leaves behind. The measure of that is that it does not grow from
one load to the next (``bench/agents.py --memory``).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _find_malloc_trim()


@dataclass(frozen=True)
class Released:
    """What one release did: the objects the full collection found unreachable, and
    whether ``malloc_trim`` gave pages back (False where it had none to give, or there
    is no ``malloc_trim``)."""

    collected: int
    trimmed: bool
    ms: float


def release_freed_memory() -> Released:
    """Free what only cycles hold, then return the C heap's free pages to the system."""
    started = time.perf_counter()
    collected = gc.collect()
    # malloc_trim returns 1 when it gave memory back, 0 when there was none to give.
    trimmed = _MALLOC_TRIM is not None and _MALLOC_TRIM(0) == 1
    released = Released(collected, trimmed, round((time.perf_counter() - started) * 1000, 1))
    log.debug(
        "returned free memory to the system",
        extra={
            "action": "memory.trimmed",
            "ms": released.ms,
            "collected": released.collected,
            "trimmed": released.trimmed,
        },
    )
    return released
