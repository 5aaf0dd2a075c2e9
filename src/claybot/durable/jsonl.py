"""Append-only JSON Lines files that survive being cut off mid-write.

A crash can leave a torn last line (no trailing newline, or bytes that do not
parse). Reading cuts that tail off the file so the next append starts clean; a
torn tail is never a reason to refuse to boot.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
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


def encode_record(record: dict[str, Any]) -> bytes:
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
    if bad:
        log.error(
            "%s: %d damaged line(s), numbers %s",
            path,
            len(bad),
            ", ".join(map(str, bad[:20])),
            extra={"action": "jsonl.damaged", "path": str(path), "lines": bad[:100]},
        )
    return JsonlRead(records, torn, len(bad), bad)
