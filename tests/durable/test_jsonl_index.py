from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claybot.durable.jsonl import encode_record, parse_jsonl
from claybot.durable.jsonl_index import JsonlIndex


def placeholder(line: int, raw: bytes) -> dict[str, Any]:
    return {"type": "damaged", "line": line, "raw": raw.decode(errors="replace")}


def full_read(path: Path) -> list[dict[str, Any]]:
    """What a whole-file parse numbers: the reference every page is checked against."""
    records, _, _ = parse_jsonl(path.read_bytes(), placeholder)
    return [{"seq": seq, **record} for seq, record in enumerate(records)]


def write_records(path: Path, count: int, start: int = 0) -> None:
    with path.open("ab") as file:
        file.write(b"".join(encode_record({"n": n}) for n in range(start, start + count)))


# A line of a history file as a crash, a hand edit or a newer engine may leave it.
LINES = st.one_of(
    st.builds(lambda n: encode_record({"n": n}), st.integers(0, 10**6)),
    st.sampled_from([b"\n", b"  \t\n", b"not json\n", b"[1, 2]\n", b'"text"\n', b"\x00\x00\n"]),
)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(LINES, max_size=40),
    torn=st.sampled_from([b"", b'{"n": 9', b"  "]),
    stride=st.integers(1, 7),
    data=st.data(),
)
def test_every_page_is_the_slice_of_a_full_read(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    torn: bytes,
    stride: int,
    data: st.DataObject,
) -> None:
    path = tmp_path_factory.mktemp("index") / "history.jsonl"
    path.write_bytes(b"".join(lines) + torn)
    expected = full_read(path)
    index = JsonlIndex(path, stride=stride)
    assert index.count() == len(expected)
    first = data.draw(st.integers(0, len(expected)))
    stop = data.draw(st.integers(first, len(expected) + 3))
    assert index.records(first, stop, placeholder) == (expected[first:stop], len(expected))
    limit = data.draw(st.integers(1, 10))
    after = data.draw(st.integers(-1, len(expected)))
    records, total = index.page(after=after, before=None, limit=limit, placeholder=placeholder)
    assert (records, total) == (expected[after + 1 : after + 1 + limit], len(expected))
    before = data.draw(st.none() | st.integers(0, len(expected) + 2))
    end = len(expected) if before is None else min(before, len(expected))
    records, _ = index.page(after=None, before=before, limit=limit, placeholder=placeholder)
    assert records == expected[max(0, end - limit) : end]
    # A second index on the same file starts from what the first one saved.
    again = JsonlIndex(path, stride=stride)
    assert again.records(0, len(expected), placeholder)[0] == expected
    assert again.rebuilds == (0 if expected else 1)  # an empty file's index is not saved


def test_appended_lines_are_indexed_on_the_next_read_and_a_torn_tail_when_it_completes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 10)
    index = JsonlIndex(path, stride=4)
    assert index.count() == 10
    with path.open("ab") as file:
        file.write(b'{"n": 10, "te')  # an append cut off: not a record yet
    assert index.count() == 10
    assert index.records(8, 20) == ([{"seq": 8, "n": 8}, {"seq": 9, "n": 9}], 10)
    with path.open("ab") as file:
        file.write(b'xt": "late"}\n')
    write_records(path, 5, start=11)
    assert index.count() == 16
    assert index.records(9, 12)[0] == [
        {"seq": 9, "n": 9},
        {"seq": 10, "n": 10, "text": "late"},
        {"seq": 11, "n": 11},
    ]
    assert index.rebuilds == 1  # built once; the appends were scanned, not the whole file


def test_a_page_reads_only_around_its_records(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 5000)
    index = JsonlIndex(path, stride=256)
    assert index.count() == 5000
    # Garble the first half of the file in place: a page near the end does not read
    # it (the index checks the end of what it covers, not every byte before).
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.write(b"x" * (size // 2))
    assert index.page(after=None, before=None, limit=3) == (
        [{"seq": 4997, "n": 4997}, {"seq": 4998, "n": 4998}, {"seq": 4999, "n": 4999}],
        5000,
    )


def test_a_deleted_index_is_built_again_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 600)
    JsonlIndex(path).count()
    index_file = path.with_name("history.jsonl.idx")
    assert index_file.exists()
    index_file.unlink()
    index = JsonlIndex(path)
    assert index.records(590, 600)[0] == full_read(path)[590:600]
    assert index.rebuilds == 1 and index_file.exists()


def test_an_index_of_another_file_content_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 600)
    assert JsonlIndex(path).count() == 600
    # Cut back (as a repair or a journal replay does) and written again differently,
    # to a length beyond what the saved index covers.
    data = path.read_bytes()
    cut = data.index(encode_record({"n": 300}))
    with path.open("r+b") as file:
        file.truncate(cut)
    with path.open("ab") as file:
        file.write(b"".join(encode_record({"n": n, "pad": "x" * 20}) for n in range(1000, 1400)))
    index = JsonlIndex(path)
    expected = full_read(path)
    assert index.records(0, len(expected))[0] == expected
    assert index.count() == 700 and index.rebuilds == 1


def test_the_same_index_notices_its_file_cut_back(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 50)
    index = JsonlIndex(path, stride=8)
    assert index.count() == 50
    data = path.read_bytes()
    with path.open("r+b") as file:
        file.truncate(data.index(encode_record({"n": 20})))
    assert index.count() == 20
    assert index.records(15, 30)[0] == full_read(path)[15:20]
    assert index.rebuilds == 2


def test_a_replaced_file_is_indexed_anew(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 40)
    assert JsonlIndex(path, stride=8).count() == 40
    replacement = tmp_path / "new.jsonl"
    write_records(replacement, 40, start=100)  # the same length, another inode
    os.replace(replacement, path)
    index = JsonlIndex(path, stride=8)
    assert index.records(0, 2)[0] == [{"seq": 0, "n": 100}, {"seq": 1, "n": 101}]
    assert index.rebuilds == 1


@pytest.mark.parametrize(
    "garbage",
    [b"", b"not json", b"[]", b'{"version": 1}', orjson.dumps({"version": 99, "stride": 256})],
)
def test_an_unreadable_index_file_is_rebuilt(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 300)
    path.with_name("history.jsonl.idx").write_bytes(garbage)
    index = JsonlIndex(path)
    assert index.records(255, 258)[0] == full_read(path)[255:258]
    assert index.rebuilds == 1


def test_an_index_whose_checkpoints_do_not_add_up_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 300)
    JsonlIndex(path).count()
    index_file = path.with_name("history.jsonl.idx")
    saved = orjson.loads(index_file.read_bytes())
    saved["checkpoints"][1][2] += 3  # an offset in the middle of a line
    saved["checkpoints"] = saved["checkpoints"][:1]  # and one missing
    index_file.write_bytes(orjson.dumps(saved))
    index = JsonlIndex(path)
    assert index.records(256, 260)[0] == full_read(path)[256:260]
    assert index.rebuilds == 1


def test_a_missing_file_has_no_records(tmp_path: Path) -> None:
    index = JsonlIndex(tmp_path / "history.jsonl")
    assert index.count() == 0
    assert index.page(after=None, before=None, limit=10) == ([], 0)
    assert not (tmp_path / "history.jsonl.idx").exists()


def test_a_stride_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        JsonlIndex(tmp_path / "history.jsonl", stride=0)


def test_a_garbled_last_line_is_a_torn_write_until_a_record_follows_it(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_records(path, 3)
    with path.open("ab") as file:
        file.write(b"\x00\x00garbage\n")
    index = JsonlIndex(path, stride=2)
    assert index.records(0, 10, placeholder) == (full_read(path), 3)
    write_records(path, 1, start=3)
    records, count = index.records(0, 10, placeholder)
    assert count == 5 and records == full_read(path)
    assert records[3] == {"seq": 3, "type": "damaged", "line": 4, "raw": "\x00\x00garbage"}


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(st.integers(0, 50), max_size=60).map(sorted),
    damaged=st.sets(st.integers(0, 59)),
    stride=st.integers(1, 7),
    bound=st.integers(-1, 52),
)
def test_bisect_finds_the_first_record_a_growing_predicate_leaves(
    tmp_path_factory: pytest.TempPathFactory,
    times: list[int],
    damaged: set[int],
    stride: int,
    bound: int,
) -> None:
    path = tmp_path_factory.mktemp("bisect") / "history.jsonl"
    # Damaged lines (which have no time, so count as the oldest) only where the
    # predicate holds anyway: it must hold for a prefix of the records.
    lines = [
        b"not json\n" if n in damaged and at < bound else encode_record({"at": at})
        for n, at in enumerate(times)
    ]
    path.write_bytes(b"".join(lines) + encode_record({"at": 99}))  # a record last, not a torn line
    records = full_read(path)

    def before(record: dict[str, Any]) -> bool:
        return bool(record.get("at", -1) < bound)

    expected = next((r["seq"] for r in records if not before(r)), len(records))
    assert JsonlIndex(path, stride=stride).bisect(before) == (expected, len(records))
