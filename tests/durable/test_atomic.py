"""Atomic replacement of many files at once."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claybot.durable.atomic import atomic_write_many, json_bytes


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


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_json_files_read_as_the_standard_librarys_indented_json(value: object) -> None:
    assert json_bytes(value) == json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False)))
def test_floats_in_json_files_read_back_equal(value: list[float]) -> None:
    # orjson spells some of them differently (0.00006103515625, not 6.103515625e-05).
    assert json.loads(json_bytes(value)) == value
