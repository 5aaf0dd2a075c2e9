"""Append-only execution files, written off the event loop and capped in size.

The original appended synchronously on every chunk (blocking the loop) and had
no per-file cap on the clean log. Here every write runs in a worker thread, and
past ``limit_bytes`` one marker line is written and the rest dropped.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import BinaryIO

MAX_LOG_BYTES = 50 * 1024 * 1024
FILE_MODE = 0o600


class CappedFileWriter:
    def __init__(self, path: Path, limit_bytes: int = MAX_LOG_BYTES) -> None:
        self.path = path
        self.limit_bytes = limit_bytes
        self.written = 0
        self.truncated = False
        self._file: BinaryIO | None = None

    async def open(self) -> None:
        self._file = await asyncio.to_thread(self._open)

    def _open(self) -> BinaryIO:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        return os.fdopen(fd, "ab")

    async def write(self, data: bytes) -> None:
        if self._file is None or self.truncated or not data:
            return
        if self.written + len(data) > self.limit_bytes:
            room = max(self.limit_bytes - self.written, 0)
            marker = f"\n[LOG TRUNCATED: exceeded the {self.limit_bytes} byte limit]\n".encode()
            data = data[:room] + marker
            self.truncated = True
        self.written += len(data)
        await asyncio.to_thread(self._file.write, data)

    async def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            await asyncio.to_thread(_flush_and_close, file)


def _flush_and_close(file: BinaryIO) -> None:
    try:
        file.flush()
        os.fsync(file.fileno())
    finally:
        file.close()
