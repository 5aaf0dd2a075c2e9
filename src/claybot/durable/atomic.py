"""Atomic file replacement: temp file, fsync, rename, fsync the directory.

A reader (or a process restarted after SIGKILL or power loss) sees either the old
file or the new one, never a half-written mix.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new directory entry durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        # O_CREAT honours the umask; the caller's mode (0600 for secrets) must win.
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def atomic_write_json(path: Path, value: Any, *, mode: int = 0o644) -> None:
    data = json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"
    atomic_write_bytes(path, data, mode=mode)
