"""Atomic replacement of many files at once."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from claybot.durable.atomic import atomic_write_many


def test_atomic_write_many_replaces_every_file_and_leaves_no_temp(tmp_path: Path) -> None:
    files = {tmp_path / f"agent-{n}" / "state.json": f'{{"n": {n}}}'.encode() for n in range(20)}
    for path in list(files)[:5]:  # some exist already
        path.parent.mkdir(parents=True)
        path.write_bytes(b"old")
    atomic_write_many(files, mode=0o600)
    for path, data in files.items():
        assert path.read_bytes() == data
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not list(tmp_path.rglob("*.tmp"))


def test_atomic_write_many_cleans_up_when_a_write_fails(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_bytes(b"old")
    blocked = tmp_path / "file-not-dir"
    blocked.write_bytes(b"")
    with pytest.raises(OSError):
        atomic_write_many({good: b"new", blocked / "state.json": b"x"})
    assert good.read_bytes() == b"old"  # nothing was renamed
    assert not list(tmp_path.rglob("*.tmp"))
