"""The newest records of the engine's log (``<home>/logs/engine.log``, JSON lines), for
the dashboard's Log page.

The file is read backwards from its end in chunks (``read_lines_backward``), so the
last 200 records of a 10 MB log cost what those records take. A level filter hides
what is below it, as ``claybot logs --level`` does; while it hides much, the reading
stops after ``SCAN_LINES`` lines rather than going through the whole file. A line that
is no record (a foreign or damaged line) is shown as it is, whatever the filter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from claybot.durable.jsonl import parse_line, read_lines_backward

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
SHOWN_LINES = 200
SCAN_LINES = 50_000
# Fields every record has, shown in their own columns; the others follow the message.
OWN_FIELDS = frozenset({"time", "level", "logger", "message", "exception"})


@dataclass(frozen=True)
class LogLine:
    time: str
    level: str  # lower case, as the engine writes it; "" for a line that is no record
    logger: str
    message: str
    fields: str = ""  # the record's other fields, key=value
    exception: str = ""


@dataclass(frozen=True)
class LogTail:
    lines: list[LogLine]  # oldest first
    scanned_all: bool  # False: the reading stopped at SCAN_LINES before SHOWN_LINES matched


def read_tail(
    path: Path, minimum: str = "debug", shown: int = SHOWN_LINES, scan: int = SCAN_LINES
) -> LogTail | None:
    """The last ``shown`` lines at ``minimum`` or above, oldest first; None without a file."""
    if not path.is_file():
        return None
    threshold = LEVELS.get(minimum, 0)
    newest_first: list[LogLine] = []
    scanned = 0
    for raw in read_lines_backward(path):
        if len(newest_first) >= shown:
            break
        scanned += 1
        if scanned > scan:
            return LogTail(newest_first[::-1], scanned_all=False)
        line = _line(raw)
        if line is None or (line.level and LEVELS.get(line.level, 20) < threshold):
            continue
        newest_first.append(line)
    return LogTail(newest_first[::-1], scanned_all=True)


def _line(raw: bytes) -> LogLine | None:
    if not raw.strip():
        return None
    record = parse_line(raw)
    if record is None:
        return LogLine("", "", "", raw.decode("utf-8", "replace").rstrip("\n"))
    fields = " ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value, default=str)}"
        for key, value in record.items()
        if key not in OWN_FIELDS
    )
    return LogLine(
        time=str(record.get("time", "")),
        level=str(record.get("level", "info")).lower(),
        logger=str(record.get("logger", "")),
        message=str(record.get("message", "")),
        fields=fields,
        exception=str(record.get("exception") or ""),
    )
