"""Append-only JSON Lines files that survive being cut off mid-write.

A crash can leave a torn last line (no trailing newline, or bytes that do not
parse). Reading cuts that tail off the file so the next append starts clean; a
torn tail is never a reason to refuse to boot.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JsonlRead:
    records: list[dict[str, Any]]
    torn_bytes: int  # bytes cut off the end of the file
    bad_lines: int  # complete lines in the middle that did not parse (skipped)


def encode_record(record: dict[str, Any]) -> bytes:
    """One compact UTF-8 JSON line (orjson: these encodes sit on the message hot path).

    Integers must fit in 64 bits: orjson would read a larger one back as a float,
    so such a record could not round-trip and is refused here instead.
    """
    try:
        return orjson.dumps(record) + b"\n"
    except TypeError as exc:
        raise ValueError(f"record cannot be stored as JSONL: {exc}") from exc


def parse_jsonl(data: bytes) -> tuple[list[dict[str, Any]], int, int]:
    """Parse bytes into records. Returns (records, length of the good prefix, bad lines)."""
    records: list[dict[str, Any]] = []
    good_end = 0
    bad_lines = 0
    start = 0
    length = len(data)
    while start < length:
        newline = data.find(b"\n", start)
        if newline == -1:
            break  # torn: the last line never got its newline
        line = data[start:newline]
        try:
            value = orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError:
            value = None
            if newline + 1 >= length:
                break  # a garbled last line is a torn write, cut it
            bad_lines += 1
        if isinstance(value, dict):
            records.append(value)
        start = newline + 1
        good_end = start
    return records, good_end, bad_lines


def read_jsonl(path: Path, *, repair: bool = True) -> JsonlRead:
    """Read every record; with ``repair`` truncate a torn tail on disk."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JsonlRead([], 0, 0)
    records, good_end, bad_lines = parse_jsonl(data)
    torn = len(data) - good_end
    if torn and repair:
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
    if bad_lines:
        log.warning(
            "skipped unreadable lines in a log",
            extra={"action": "jsonl.skip", "path": str(path), "lines": bad_lines},
        )
    return JsonlRead(records, torn, bad_lines)
