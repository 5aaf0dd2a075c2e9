"""Giving memory back to the operating system after a large unload.

When hundreds of agents are unloaded at once, their contexts are freed, but the
process's resident memory stays where the load left it, in two places:

- glibc keeps the freed pages in its heap for later use. ``malloc_trim`` hands them
  back, after a full garbage collection has freed what only cycles still held.
- CPython's small-object allocator gives an arena (1 MiB, in pools of 16 KiB) back
  only when every pool in it is free, and the few objects that outlive a load (an
  index entry, a connection's last request) are spread over the arenas the load
  needed. After 200 event streams had come and gone, 10-13 MB of free pools stayed
  resident that way. ``_free_pools`` (a C extension, ``_free_pools.c``) knows the
  arenas and releases the pages of each free pool but its header's.

Together they cost 15-25 ms, so they run only after an unload large enough to have
freed much. Where the C library has no ``malloc_trim`` (musl, macOS) the first does
nothing; where the extension could not be built, or CPython's allocator is not in use
(``PYTHONMALLOC``, ``-X dev``), the second does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType

log = logging.getLogger(__name__)


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def _find_free_pools() -> ModuleType | None:
    if os.environ.get("PYTHONMALLOC", "pymalloc") != "pymalloc" or sys.flags.dev_mode:
        return None  # another allocator, or debug hooks around this one
    try:
        from claybot.kernel import _free_pools
    except ImportError:  # not built: no compiler where ClayBot was installed
        return None
    return _free_pools


_MALLOC_TRIM = _find_malloc_trim()
_FREE_POOLS = _find_free_pools()
_tracking = False


def track_arenas() -> bool:
    """Know every arena CPython allocates from now on, so that their free pools can be
    released; call it early in a process that runs agents (idempotent). False where
    that is not possible."""
    global _tracking
    if _FREE_POOLS is not None and not _tracking:
        # False if the allocator's layout is not the one the extension knows.
        _tracking = bool(_FREE_POOLS.install())
    return _tracking


def release_freed_memory() -> bool:
    """Return the free memory to the operating system; False where unsupported."""
    if _MALLOC_TRIM is None and not _tracking:
        return False
    started = time.perf_counter()
    # Cycles first: an event stream that ended leaves its last writes' bytes (up to
    # 256 KB each) in reference cycles. 200 readers that left after 2,000 messages
    # kept 20-45 MB of the C heap this way until a full collection came by itself.
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
    pool_bytes = _FREE_POOLS.release() if _tracking and _FREE_POOLS is not None else 0
    log.debug(
        "returned free memory to the system",
        extra={
            "action": "memory.trimmed",
            "ms": round((time.perf_counter() - started) * 1000, 1),
            "poolBytes": pool_bytes,
        },
    )
    return True
