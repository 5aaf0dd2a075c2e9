"""Giving memory back to the operating system after a large unload.

When hundreds of agents are unloaded at once, their contexts are freed, but glibc
keeps the freed pages in its heap for later use and the process's resident memory
stays where the load left it. ``malloc_trim`` hands the free pages back, after a full
garbage collection has freed what only cycles still held; together they cost 15-25 ms,
so they run only after an unload large enough to have freed much.
Where the C library has no ``malloc_trim`` (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _find_malloc_trim()


def release_freed_memory() -> bool:
    """Return the C heap's free pages to the operating system; False where unsupported."""
    if _MALLOC_TRIM is None:
        return False
    started = time.perf_counter()
    # Cycles first: an event stream that ended leaves its last writes' bytes (up to
    # 256 KB each) in reference cycles. 200 readers that left after 2,000 messages
    # kept 20-45 MB of the C heap this way until a full collection came by itself.
    gc.collect()
    _MALLOC_TRIM(0)
    log.debug(
        "returned free heap pages to the system",
        extra={"action": "memory.trimmed", "ms": round((time.perf_counter() - started) * 1000, 1)},
    )
    return True
