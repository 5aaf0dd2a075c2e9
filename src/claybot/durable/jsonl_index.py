"""A sparse index of an append-only JSONL file's records, so that a page costs its size.

A record is a complete, non-blank line, as ``parse_jsonl`` reads them (a garbled last
line is a torn write until a record follows it); records are numbered from 0 in
file order (what history pages call ``seq``). Reading records
``a..b`` of a 100,000-record file used to parse all of it (2 s); with the index it
seeks to the nearest checkpoint at or before ``a`` (every ``stride``-th record's
byte offset and line number) and reads at most ``stride`` lines more than the page.

The index is a cache, never a second source of truth. It lives beside the file
(``history.jsonl`` -> ``history.jsonl.idx``) and says which prefix of the file it
covers: the prefix's length, the file's inode, and a checksum of the prefix's last
bytes. Whenever it is used it is checked against the file first, and rebuilt from
the file when it is missing, unreadable, or does not match (the file was cut back
by a repair or a journal replay, or replaced; a hand edit inside the covered part
is seen when it changes that part's length or its last bytes). Lines appended
after the covered prefix are scanned and added on the next read (only complete
lines: a torn tail is left for the file's own repair). It is written atomically and
without a sync: a crash leaves the old index or none, and either is checked before
use.

One index object serves one file within a process; its lock makes a read and the
refresh before it one step, so threads reading the same file do not race.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from claybot.durable.atomic import write_all
from claybot.durable.jsonl import garbled, parse_line

log = logging.getLogger(__name__)

STRIDE = 256  # records between checkpoints: a page reads at most this many more lines
VERSION = 1
TAIL_CHECK_BYTES = 64  # the covered prefix's last bytes, checksummed
READ_CHUNK = 64 * 1024

# Builds the record that stands in for a damaged line: (line number from 1, its bytes).
Placeholder = Callable[[int, bytes], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    record: int  # the record's number (from 0)
    line: int  # the number of lines before it (so its own line number is line + 1)
    offset: int  # where its line starts in the file


@dataclass(frozen=True, slots=True)
class NumberedLine:
    record: int
    line: int  # from 1, blank lines counted, as in the damaged records' "line"
    data: bytes


@dataclass(slots=True)
class _Covered:
    """What the index knows: the file's prefix up to ``end`` holds ``count`` records."""

    inode: int = 0
    count: int = 0
    lines: int = 0
    end: int = 0
    tail_crc: int = 0
    checkpoints: list[Checkpoint] = field(default_factory=list)


class JsonlIndex:
    """Record numbers to byte offsets for one append-only JSONL file."""

    def __init__(self, path: Path, *, stride: int = STRIDE) -> None:
        if stride < 1:
            raise ValueError(f"a stride is at least 1 record, not {stride!r}")
        self.path = path
        self.index_path = path.with_name(path.name + ".idx")
        self.stride = stride
        self.rebuilds = 0  # times the index was built from the whole file (tests, logs)
        self._covered: _Covered | None = None  # None: not loaded from disk yet
        self._saved_checkpoints = -1  # checkpoints in the file on disk, -1 if none is
        self._lock = threading.Lock()

    def count(self) -> int:
        """How many records the file holds now (its complete lines)."""
        with self._lock:
            return self._refresh().count

    def lines(self, first: int, stop: int) -> tuple[list[NumberedLine], int]:
        """The raw lines of records ``first`` up to ``stop`` (not included), and the
        file's record count, read in one refresh."""
        with self._lock:
            covered = self._refresh()
            first = max(0, first)
            stop = min(stop, covered.count)
            if first >= stop:
                return [], covered.count
            return self._read(covered, first, stop), covered.count

    def page(
        self,
        *,
        after: int | None,
        before: int | None,
        limit: int,
        placeholder: Placeholder | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of records and the file's record count, in one refresh: with
        ``after``, the ``limit`` records numbered above it; without, the newest
        ``limit`` records below ``before`` (or below the end). Records are dicts: JSON
        objects as read from disk, before the reader that knows their kind validates them."""
        with self._lock:
            covered = self._refresh()
            if after is not None:
                first = after + 1
                stop = first + limit
            else:
                stop = covered.count if before is None else max(0, min(before, covered.count))
                first = stop - limit
            first, stop = max(0, first), min(stop, covered.count)
            numbered = self._read(covered, first, stop) if first < stop else []
        return _parsed(numbered, placeholder), covered.count

    def records(
        self, first: int, stop: int, placeholder: Placeholder | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Records ``first..stop-1`` parsed, each with its number as ``seq`` first; a
        line that is no JSON object becomes ``placeholder``'s record (or is left out).
        Records are dicts: JSON objects as read from disk, not yet validated."""
        numbered, count = self.lines(first, stop)
        return _parsed(numbered, placeholder), count

    def bisect(self, before: Callable[[dict[str, Any]], bool]) -> tuple[int, int]:
        """The number of the first record ``before`` is false for, and the record
        count; ``before`` must hold for a prefix of the records (times that only grow,
        say) and is given ``{}`` for a damaged line. A binary search over the
        checkpoints, reading one line each, then at most a stride of lines."""
        with self._lock:
            covered = self._refresh()
            points = covered.checkpoints
            low, high = 0, len(points)  # the first checkpoint ``before`` is false for
            with open(self.path, "rb") as file:
                while low < high:
                    middle = (low + high) // 2
                    file.seek(points[middle].offset)
                    if before(parse_line(file.readline().rstrip(b"\n")) or {}):
                        low = middle + 1
                    else:
                        high = middle
            start = points[low - 1].record if low else 0
            stop = points[low].record if low < len(points) else covered.count
            if start < stop:
                for line in self._read(covered, start, stop):
                    if not before(parse_line(line.data) or {}):
                        return line.record, covered.count
            return stop, covered.count

    # -- keeping the index true to the file -----------------------------------

    def _refresh(self) -> _Covered:
        """Check the index against the file and bring it up to the file's end."""
        try:
            with open(self.path, "rb") as file:
                stat = os.fstat(file.fileno())
                covered = self._covered
                if covered is None:
                    covered = self._load()
                if covered is None or not self._matches(file, stat, covered):
                    if covered is not None or self.index_path.exists():
                        log.info(
                            "rebuilding a history index that does not match its file",
                            extra={"action": "jsonl_index.rebuilt", "path": str(self.path)},
                        )
                    covered = _Covered(inode=stat.st_ino)
                    self.rebuilds += 1
                    self._saved_checkpoints = -1
                if stat.st_size > covered.end:
                    self._extend(file, covered)
        except FileNotFoundError:
            covered = _Covered()
        self._covered = covered
        if covered.count and (
            len(covered.checkpoints) != self._saved_checkpoints or not self.index_path.exists()
        ):
            self._save(covered)
        return covered

    def _matches(self, file: Any, stat: os.stat_result, covered: _Covered) -> bool:
        if covered.inode != stat.st_ino or covered.end > stat.st_size:
            return False
        start = max(0, covered.end - TAIL_CHECK_BYTES)
        file.seek(start)
        return zlib.crc32(file.read(covered.end - start)) == covered.tail_crc

    def _extend(self, file: Any, covered: _Covered) -> None:
        """Scan the lines after the covered prefix; only complete ones are counted."""
        file.seek(covered.end)
        pending = b""
        position = covered.end  # the file offset of ``pending``'s first byte
        last_start = -1  # where the last complete line scanned starts
        while chunk := file.read(READ_CHUNK):
            data = pending + chunk
            start = 0
            while (newline := data.find(b"\n", start)) != -1:
                last_start = position + start
                covered.lines += 1
                if not data[start:newline].isspace() and newline > start:
                    if covered.count % self.stride == 0:
                        covered.checkpoints.append(
                            Checkpoint(covered.count, covered.lines - 1, position + start)
                        )
                    covered.count += 1
                start = newline + 1
            pending = data[start:]
            position += start
        if last_start >= 0 and not pending:
            # A garbled last line is a torn write, as a whole read takes it: not a
            # record (yet). Lines appended after it make it a damaged one.
            file.seek(last_start)
            line = file.read(position - last_start - 1)
            if line.strip() and garbled(line):
                covered.lines -= 1
                covered.count -= 1
                if covered.count % self.stride == 0:
                    covered.checkpoints.pop()
                position = last_start
        covered.end = position
        begin = max(0, position - TAIL_CHECK_BYTES)
        file.seek(begin)
        covered.tail_crc = zlib.crc32(file.read(position - begin))

    def _read(self, covered: _Covered, first: int, stop: int) -> list[NumberedLine]:
        checkpoint = covered.checkpoints[first // self.stride]
        out: list[NumberedLine] = []
        record, line = checkpoint.record, checkpoint.line
        with open(self.path, "rb") as file:
            file.seek(checkpoint.offset)
            pending = b""
            while record < stop and (chunk := file.read(READ_CHUNK)):
                data = pending + chunk
                start = 0
                while record < stop and (newline := data.find(b"\n", start)) != -1:
                    line += 1
                    text = data[start:newline]
                    if text and not text.isspace():
                        if record >= first:
                            out.append(NumberedLine(record, line, text))
                        record += 1
                    start = newline + 1
                pending = data[start:]
        return out

    # -- the index file ------------------------------------------------------

    def _load(self) -> _Covered | None:
        try:
            raw = orjson.loads(self.index_path.read_bytes())
            if raw["version"] != VERSION or raw["stride"] != self.stride:
                return None
            covered = _Covered(
                inode=int(raw["inode"]),
                count=int(raw["count"]),
                lines=int(raw["lines"]),
                end=int(raw["end"]),
                tail_crc=int(raw["tailCrc"]),
                checkpoints=[Checkpoint(int(r), int(n), int(o)) for r, n, o in raw["checkpoints"]],
            )
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # unreadable or of another shape: rebuilt from the file
        expected = -(-covered.count // self.stride)  # a checkpoint per stride started
        if len(covered.checkpoints) != expected or any(
            point.record != n * self.stride for n, point in enumerate(covered.checkpoints)
        ):
            return None
        self._saved_checkpoints = len(covered.checkpoints)
        return covered

    def _save(self, covered: _Covered) -> None:
        """Written when a checkpoint was added (every ``stride`` records), not on every
        read: what it lacks at the next start is scanned from its end, a stride or so."""
        body = orjson.dumps(
            {
                "version": VERSION,
                "stride": self.stride,
                "inode": covered.inode,
                "count": covered.count,
                "lines": covered.lines,
                "end": covered.end,
                "tailCrc": covered.tail_crc,
                "checkpoints": [(p.record, p.line, p.offset) for p in covered.checkpoints],
            }
        )
        tmp = self.index_path.with_name(f".{self.index_path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                write_all(fd, body)
            finally:
                os.close(fd)
            os.replace(tmp, self.index_path)
        except OSError as exc:  # a cache: a full disk or a read-only folder costs speed only
            tmp.unlink(missing_ok=True)
            log.warning(
                "could not write a history index; reads scan from the last one written",
                extra={
                    "action": "jsonl_index.unsaved",
                    "path": str(self.index_path),
                    "error": str(exc),
                },
            )
            return
        self._saved_checkpoints = len(covered.checkpoints)


def _parsed(numbered: list[NumberedLine], placeholder: Placeholder | None) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for line in numbered:
        record = parse_line(line.data)
        if record is None:
            if placeholder is None:
                continue
            record = placeholder(line.line, line.data)
        records.append({"seq": line.record, **record})
    return records
