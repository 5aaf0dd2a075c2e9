"""`claybot logs`: the engine's JSON log as readable lines, filtered, and followed."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli, spawn

pytestmark = pytest.mark.slow


def record(level: str, message: str, **fields: Any) -> str:
    entry = {"time": "2026-11-25T13:14:15", "level": level, "logger": "claybot.x"}
    return json.dumps({**entry, "message": message, **fields})


def write_log(paths: HomePaths, *lines: str) -> None:
    paths.logs.mkdir(parents=True, exist_ok=True)
    with (paths.logs / "engine.log").open("a") as log:
        log.writelines(line + "\n" for line in lines)


def test_records_read_as_lines_and_the_level_filters(paths: HomePaths) -> None:
    write_log(
        paths,
        record("info", "engine ready", action="engine.ready"),
        record("warning", "provider unavailable", action="provider.unavailable", provider="x"),
        record("error", "a turn failed", exception="Traceback (most recent call last):\n  boom"),
        "not json at all",
    )
    shown = cli(paths, "logs")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "13:14:15 INFO    engine ready action=engine.ready"
    assert lines[1] == (
        "13:14:15 WARNING provider unavailable action=provider.unavailable provider=x"
    )
    assert lines[2] == "13:14:15 ERROR   a turn failed"
    assert lines[3:5] == ["    Traceback (most recent call last):", "      boom"]
    assert lines[5] == "not json at all"
    warnings = cli(paths, "logs", "--level", "warning").stdout
    assert "engine ready" not in warnings and "provider unavailable" in warnings
    last = cli(paths, "logs", "-n", "1", "--json").stdout.splitlines()
    assert last == ['{"raw": "not json at all"}']


def test_a_home_without_a_log_is_explained(paths: HomePaths) -> None:
    result = cli(paths, "logs")
    assert result.returncode == 1 and "no log yet" in result.stderr
    assert "unknown level" in cli(paths, "logs", "--level", "loud").stderr


def test_follow_prints_new_records_and_goes_on_after_a_rotation(paths: HomePaths) -> None:
    write_log(paths, record("info", "before"))
    follower = spawn(paths, "logs", "-f", stderr=subprocess.DEVNULL)
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline().endswith("before\n")
        write_log(paths, record("info", "appended"))
        assert follower.stdout.readline().endswith("appended\n")
        # The engine's handler renames engine.log to engine.log.1 and starts a new file.
        os.rename(paths.logs / "engine.log", paths.logs / "engine.log.1")
        write_log(paths, record("info", "after rotation"))
        assert follower.stdout.readline().endswith("after rotation\n")
    finally:
        follower.terminate()
        follower.wait(10)
