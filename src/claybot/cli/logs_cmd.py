"""``claybot logs``: the engine's log (``<home>/logs/engine.log``, JSON lines) for people.

Each record becomes one line: the time, the level, what happened and its fields (an
exception's traceback follows, indented). ``--follow`` keeps reading as the engine
writes, across the log's rotation; ``--level`` hides what is below it. A line that is
not a record (a torn last line, a foreign file) is shown as it is.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.markup import escape

from claybot.cli.common import HomeOption, JsonOption, console, fail, paths_for, print_json_line

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
STYLES = {"warning": "yellow", "error": "red", "critical": "bold red"}
# Fields every record has, shown in the line's own columns rather than as key=value.
OWN_FIELDS = {"time", "level", "logger", "message", "exception"}
FOLLOW_POLL_S = 0.25


def logs(
    home: HomeOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing as the engine logs.")
    ] = False,
    level: Annotated[
        str, typer.Option("--level", help="Hide records below this: debug, info, warning, error.")
    ] = "info",
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=0, help="Records to show from the end first.")
    ] = 50,
    as_json: JsonOption = False,
) -> None:
    """Show the engine's log readably (the last 50 records; -f follows)."""
    threshold = LEVELS.get(level.lower())
    if threshold is None:
        fail(f"unknown level {level!r}: one of {', '.join(LEVELS)}", field="level")
    path = paths_for(home).logs / "engine.log"
    if not path.exists() and not follow:
        fail(f"no log yet at {path}: the engine writes it once it has started", error="not_found")
    try:
        for raw in _records(path, lines, follow):
            record = _parse(raw)
            if record is not None and LEVELS.get(str(record.get("level")), 20) < threshold:
                continue
            if as_json:
                # Every line an object: one that is not a record comes as {"raw": line}.
                print_json_line(record if record is not None else {"raw": raw})
            else:
                console.print(_line(record, raw), highlight=False, soft_wrap=True)
    except KeyboardInterrupt:
        pass


def _records(path: Path, last: int, follow: bool) -> Iterator[str]:
    """The last ``last`` lines of the file, then (following) every line written after."""
    handle = _open(path)
    if handle is not None:
        yield from deque((line.rstrip("\n") for line in handle), maxlen=last)
    if not follow:
        return
    partial = ""
    while True:
        if handle is None or _rotated(path, handle):
            if handle is not None:
                # What the old file still held after the last read, then the new one.
                yield from (line.rstrip("\n") for line in handle)
                handle.close()
            handle = _open(path)
            if handle is None:
                time.sleep(FOLLOW_POLL_S)
                continue
        chunk = handle.readline()
        if not chunk:
            time.sleep(FOLLOW_POLL_S)
            continue
        partial += chunk
        if partial.endswith("\n"):  # a line the engine is still writing waits for its end
            yield partial.rstrip("\n")
            partial = ""


def _open(path: Path) -> IO[str] | None:
    try:
        return path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _rotated(path: Path, handle: IO[str]) -> bool:
    """The log was rotated (engine.log renamed to engine.log.1) or truncated."""
    try:
        current = path.stat()
    except FileNotFoundError:
        return False  # between the rename and the new file
    opened = os.fstat(handle.fileno())
    return current.st_ino != opened.st_ino or current.st_size < handle.tell()


def _parse(raw: str) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _line(record: dict[str, Any] | None, raw: str) -> str:
    if record is None:
        return escape(raw)
    level = str(record.get("level", "info"))
    when = str(record.get("time", ""))[11:19] or "--:--:--"
    fields = " ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value, default=str)}"
        for key, value in record.items()
        if key not in OWN_FIELDS
    )
    style = STYLES.get(level)
    label = f"[{style}]{level.upper():7}[/{style}]" if style else f"{level.upper():7}"
    text = f"{when} {label} {escape(str(record.get('message', '')))}"
    if fields:
        text += f" [dim]{escape(fields)}[/dim]"
    exception = record.get("exception")
    if exception:
        text += "\n" + escape("\n".join("    " + line for line in str(exception).splitlines()))
    return text
