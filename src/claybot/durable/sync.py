"""Making many files durable at once: one ``syncfs`` instead of an fsync per file."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Iterable
from pathlib import Path

# Past this many files one syncfs beats one fdatasync per file.
SYNCFS_MIN_FILES = 4


def _load_syncfs() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    fn = getattr(libc, "syncfs", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


SYNCFS = _load_syncfs()


def sync_fds(fds: list[int]) -> None:
    """Durable: one syncfs for several descriptors (same file system), else fdatasync each."""
    if len(fds) >= SYNCFS_MIN_FILES and SYNCFS is not None and SYNCFS(fds[0]) == 0:
        return
    for fd in fds:
        os.fdatasync(fd)


def sync_paths(paths: Iterable[Path]) -> None:
    """Make the given files (or directories) durable; missing ones are skipped."""
    fds = []
    try:
        for path in paths:
            try:
                fds.append(os.open(path, os.O_RDONLY))
            except FileNotFoundError:
                continue
        if fds:
            sync_fds(fds)
    finally:
        for fd in fds:
            os.close(fd)
