"""Append-only JSON Lines files that survive being cut off mid-write.

A crash can leave a torn last line (no trailing newline, or bytes that do not
parse). Reading cuts that tail off the file so the next append starts clean; a
torn tail is never a reason to refuse to boot.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)


# Builds the record that stands in for a damaged line: (line number from 1, its bytes).
Placeholder = Callable[[int, bytes], dict[str, Any]]


@dataclass(frozen=True)
class JsonlRead:
    records: list[dict[str, Any]]
    torn_bytes: int  # bytes cut off the end of the file
    bad_lines: int  # complete lines in the middle that are no JSON object
    bad_line_numbers: list[int] = field(default_factory=list)  # from 1


def encode_record(record: Mapping[str, Any]) -> bytes:
    """One compact UTF-8 JSON line (orjson: these encodes sit on the message hot path).

    Integers must fit in 64 bits: orjson would read a larger one back as a float,
    so such a record could not round-trip and is refused here instead.
    """
    try:
        return orjson.dumps(record) + b"\n"
    except TypeError as exc:
        raise ValueError(f"record cannot be stored as JSONL: {exc}") from exc


def parse_jsonl(
    data: bytes, placeholder: Placeholder | None = None
) -> tuple[list[dict[str, Any]], int, list[int]]:
    """Parse bytes into records: (records, length of the good prefix, damaged line numbers).

    A complete line in the middle that is no JSON object is damaged: skipped, or with
    ``placeholder`` replaced by the record it builds, so a reader sees it is there.
    Records are dicts: JSON objects as read from disk, before the reader that knows
    their kind (history, inbox, ledger) validates them.
    """
    records: list[dict[str, Any]] = []
    good_end = 0
    bad: list[int] = []
    start = 0
    length = len(data)
    number = 0
    while start < length:
        newline = data.find(b"\n", start)
        if newline == -1:
            break  # torn: the last line never got its newline
        number += 1
        line = data[start:newline]
        try:
            value = orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError:
            if newline + 1 >= length:
                break  # a garbled last line is a torn write, cut it
            value = line
        if isinstance(value, dict):
            records.append(value)
        elif value is not None:
            bad.append(number)
            if placeholder is not None:
                records.append(placeholder(number, line))
        start = newline + 1
        good_end = start
    return records, good_end, bad


def read_jsonl(
    path: Path, *, repair: bool = True, placeholder: Placeholder | None = None
) -> JsonlRead:
    """Read every record; with ``repair`` truncate a torn tail on disk."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JsonlRead([], 0, 0)
    records, good_end, bad = parse_jsonl(data, placeholder)
    torn = len(data) - good_end
    if torn and repair:
        _cut(path, good_end, torn)
    if bad:
        log.error(
            "%s: %d damaged line(s), numbers %s",
            path,
            len(bad),
            ", ".join(map(str, bad[:20])),
            extra={"action": "jsonl.damaged", "path": str(path), "lines": bad[:100]},
        )
    return JsonlRead(records, torn, len(bad), bad)


def _cut(path: Path, good_end: int, torn: int) -> None:
    log.warning(
        "cut a torn tail off a log",
        extra={"action": "jsonl.repair", "path": str(path), "bytes": torn},
    )
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, good_end)
        os.fsync(fd)
    finally:
        os.close(fd)


def cut_torn_tail(path: Path) -> int:
    """What ``read_jsonl(path, repair=True)`` cuts off the end, reading only the end:
    a last line without its newline, or a last line that is no JSON. The bytes cut."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if not size:
        return 0
    last = next(read_lines_backward(path, with_partial=True))
    good_end = size
    if not last.endswith(b"\n"):
        good_end -= len(last)  # the last line never got its newline
    elif last.strip() and garbled(last[:-1]):
        good_end -= len(last)  # a garbled last line is a torn write (not one before a tail)
    if good_end < size:
        _cut(path, good_end, size - good_end)
    return size - good_end


def garbled(line: bytes) -> bool:
    """Whether a line is no JSON at all (at the end of a file: a torn write)."""
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return True
    return False


def parse_line(line: bytes) -> dict[str, Any] | None:
    """A line's record, or None when it is no JSON object (a damaged line). A dict: a
    JSON object as read from disk, before the reader that knows its kind validates it."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


TAIL_CHUNK = 64 * 1024


def read_lines_backward(path: Path, *, with_partial: bool = False) -> Iterator[bytes]:
    """The file's lines from the last to the first, each with its newline, read in
    chunks from the end: taking the newest records costs what they take, not the
    file. A last line with no newline (a torn write) is left out unless
    ``with_partial``."""
    try:
        file = path.open("rb")
    except FileNotFoundError:
        return
    with file:
        position = file.seek(0, os.SEEK_END)
        buffer = b""  # read and not yet given out: the start of the line being read
        tail_open = True  # what follows the file's last newline is still to be seen
        while position > 0:
            step = min(TAIL_CHUNK, position)
            position -= step
            file.seek(position)
            buffer = file.read(step) + buffer
            stop = len(buffer)
            while (newline := buffer.rfind(b"\n", 0, stop)) != -1:
                segment = buffer[newline + 1 : stop]
                if tail_open:
                    tail_open = False
                    if segment and with_partial:
                        yield segment
                else:
                    yield segment + b"\n"
                stop = newline
            buffer = buffer[:stop]
        if not tail_open:
            yield buffer + b"\n"  # the first line
        elif buffer and with_partial:
            yield buffer  # no newline in the whole file: one torn line
