"""Where a run's output goes: the ``.jsonl`` and ``.log`` files, the live buffer, clients.

Everything is redacted first. The ``.log`` is redacted a whole line at a time,
so a secret split across two stream pieces is still masked there.
"""

from __future__ import annotations

from collections.abc import Callable

from claybot.proactive.logfile import CappedFileWriter
from claybot.proactive.store import ExecutionFiles

LIVE_BUFFER_CHARS = 512 * 1024
PENDING_LINE_CHARS = 64 * 1024


class LiveBuffer:
    """The current (or last) run's clean text, its last ``limit`` characters."""

    def __init__(self, limit: int = LIVE_BUFFER_CHARS) -> None:
        self.limit = limit
        self._parts: list[str] = []
        self._size = 0

    def reset(self) -> None:
        self._parts.clear()
        self._size = 0

    def append(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        if self._size > 2 * self.limit:
            joined = "".join(self._parts)[-self.limit :]
            self._parts = [joined]
            self._size = len(joined)

    def text(self) -> str:
        return "".join(self._parts)[-self.limit :]


class ExecutionOutput:
    """A ``RunSink`` for one execution."""

    def __init__(
        self,
        files: ExecutionFiles,
        redact: Callable[[str], str],
        live: LiveBuffer,
        on_text: Callable[[str], None],
    ) -> None:
        self._raw = CappedFileWriter(files.jsonl)
        self._log = CappedFileWriter(files.log)
        self._redact = redact
        self._live = live
        self._on_text = on_text
        self._pending = ""
        self._newlines = 0
        self._ends_line = True  # nothing written yet, or the last text ended a line

    async def open(self) -> None:
        await self._raw.open()
        await self._log.open()

    async def raw(self, line: bytes) -> None:
        await self._raw.write(self._redact(line.decode(errors="replace")).encode())

    async def text(self, piece: str) -> None:
        shown = self._redact(piece)
        self._live.append(shown)
        self._on_text(shown)
        if not piece:
            return
        self._newlines += piece.count("\n")
        self._ends_line = piece.endswith("\n")
        self._pending += piece
        if "\n" in self._pending:
            complete, _, self._pending = self._pending.rpartition("\n")
            await self._log.write(self._redact(complete + "\n").encode())
        if len(self._pending) > PENDING_LINE_CHARS:
            await self._flush_pending()

    @property
    def lines(self) -> int:
        """Lines of clean text (a last line without a newline counts)."""
        return self._newlines + (0 if self._ends_line else 1)

    async def _flush_pending(self) -> None:
        if self._pending:
            await self._log.write(self._redact(self._pending).encode())
            self._pending = ""

    async def close(self) -> None:
        await self._flush_pending()
        await self._raw.close()
        await self._log.close()
