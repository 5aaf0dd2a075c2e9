"""The engine log's tail: read from the end, filtered by level, oldest first."""

from __future__ import annotations

import json
from pathlib import Path, PosixPath
from typing import Any

from claybot.web.log_tail import read_tail


def record(level: str, message: str, **extra: Any) -> str:
    return json.dumps({"time": "2025-01-02T03:04:05", "level": level, "logger": "claybot.x",
                       "message": message, **extra})  # fmt: skip


class CountingPath(PosixPath):
    """A path whose opened file counts the bytes read from it."""

    read_bytes_total = 0

    def open(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        opened = super().open(*args, **kwargs)

        class Counting:
            def __enter__(self) -> Counting:
                return self

            def __exit__(self, *exc: object) -> None:
                opened.close()

            def seek(self, *where: int) -> int:
                return opened.seek(*where)

            def read(self, size: int = -1) -> bytes:
                data: bytes = opened.read(size)
                CountingPath.read_bytes_total += len(data)
                return data

        return Counting()


def test_a_big_log_is_read_from_its_end_only(tmp_path: Path) -> None:
    path = tmp_path / "engine.log"
    filler = record("info", "x" * 900) + "\n"
    with path.open("w") as file:
        file.write(filler * (10 * 1024 * 1024 // len(filler)))  # about 10 MB
        for n in range(250):
            file.write(record("info", f"last {n}", action="test.tail") + "\n")
    CountingPath.read_bytes_total = 0
    tail = read_tail(CountingPath(path))
    assert tail is not None and tail.scanned_all
    assert [line.message for line in tail.lines] == [f"last {n}" for n in range(50, 250)]
    assert tail.lines[0].fields == "action=test.tail" and tail.lines[0].level == "info"
    assert CountingPath.read_bytes_total < 256 * 1024  # not the 10 MB


def test_the_filter_keeps_lines_at_or_above_its_level(tmp_path: Path) -> None:
    path = tmp_path / "engine.log"
    levels = ["debug", "info", "warning", "error", "critical"]
    path.write_text("".join(record(level, level) + "\n" for level in levels) + "torn {")
    for minimum, expected in [
        ("debug", levels),
        ("info", levels[1:]),
        ("warning", levels[2:]),
        ("error", levels[3:]),
    ]:
        tail = read_tail(path, minimum)
        assert tail is not None
        assert [line.message for line in tail.lines] == expected  # the torn last line left out


def test_lines_that_are_no_record_show_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "engine.log"
    traceback = "Traceback (most recent call last):\n  boom"
    path.write_text(
        "plain text\n" + record("error", "failed", exception=traceback) + "\n[1, 2]\n\n"
    )
    tail = read_tail(path, "error")
    assert tail is not None
    assert [(line.level, line.message) for line in tail.lines] == [
        ("", "plain text"),
        ("error", "failed"),
        ("", "[1, 2]"),
    ]
    assert tail.lines[1].exception == traceback and tail.lines[1].fields == ""


def test_a_filter_that_hides_much_stops_reading(tmp_path: Path) -> None:
    path = tmp_path / "engine.log"
    path.write_text(record("error", "old") + "\n" + (record("info", "chatter") + "\n") * 500)
    tail = read_tail(path, "error", scan=100)
    assert tail is not None and tail.lines == [] and not tail.scanned_all
    tail = read_tail(path, "error")
    assert tail is not None and [line.message for line in tail.lines] == ["old"]


def test_no_file_is_none(tmp_path: Path) -> None:
    assert read_tail(tmp_path / "engine.log") is None
