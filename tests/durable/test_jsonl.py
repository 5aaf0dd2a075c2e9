from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claybot.durable.jsonl import cut_torn_tail, encode_record, read_jsonl, read_lines_backward


def test_a_torn_last_line_is_cut_off_and_the_file_repaired(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"n": 1}) + encode_record({"n": 2}) + b'{"n": 3, "tex')
    result = read_jsonl(path)
    assert result.records == [{"n": 1}, {"n": 2}]
    assert result.torn_bytes == len(b'{"n": 3, "tex')
    assert path.read_bytes() == encode_record({"n": 1}) + encode_record({"n": 2})
    with path.open("ab") as handle:  # the next append starts on a clean line
        handle.write(encode_record({"n": 4}))
    assert [r["n"] for r in read_jsonl(path).records] == [1, 2, 4]


def test_a_garbled_complete_last_line_is_also_torn(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"n": 1}) + b"\x00\x00garbage\n")
    assert read_jsonl(path).records == [{"n": 1}]
    assert path.read_bytes() == encode_record({"n": 1})


def test_a_bad_line_in_the_middle_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"n": 1}) + b"not json\n" + encode_record({"n": 2}))
    result = read_jsonl(path)
    assert result.records == [{"n": 1}, {"n": 2}] and result.bad_lines == 1


def test_reading_without_repair_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    data = encode_record({"n": 1}) + b'{"partial'
    path.write_bytes(data)
    assert read_jsonl(path, repair=False).records == [{"n": 1}]
    assert path.read_bytes() == data


def test_a_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_jsonl(tmp_path / "absent.jsonl").records == []


records = st.lists(
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.integers(min_value=-(2**63), max_value=2**64 - 1), st.text(max_size=20)),
        max_size=3,
    ),
    max_size=8,
)


@given(records=records, cut=st.integers(min_value=0, max_value=10_000))
def test_any_prefix_of_a_log_reads_as_a_prefix_of_its_records(
    tmp_path_factory: object, records: list[dict[str, object]], cut: int
) -> None:
    data = b"".join(encode_record(record) for record in records)
    from claybot.durable.jsonl import parse_jsonl

    prefix = data[: min(cut, len(data))]
    parsed, good_end, _ = parse_jsonl(prefix)
    assert parsed == records[: len(parsed)]
    assert prefix[:good_end].count(b"\n") == len(parsed)
    assert json.dumps(parsed)


def test_integers_beyond_64_bits_are_refused_rather_than_read_back_wrong() -> None:
    with pytest.raises(ValueError, match="cannot be stored"):
        encode_record({"n": -(2**63) - 1})


@given(
    lines=st.lists(
        st.sampled_from([encode_record({"n": 1}), b"not json\n", b"\n", b"[1]\n", b"\x00\x00\n"]),
        max_size=8,
    ),
    tail=st.sampled_from([b"", b'{"n": 2', b"garbage", b"  "]),
)
def test_cutting_the_torn_tail_from_the_end_leaves_what_a_whole_read_leaves(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes
) -> None:
    folder = tmp_path_factory.mktemp("tail")
    whole, end = folder / "whole.jsonl", folder / "end.jsonl"
    for path in (whole, end):
        path.write_bytes(b"".join(lines) + tail)
    read_jsonl(whole, repair=True)
    cut = cut_torn_tail(end)
    assert end.read_bytes() == whole.read_bytes()
    assert cut == len(b"".join(lines) + tail) - len(whole.read_bytes())
    assert list(read_lines_backward(end)) == end.read_bytes().splitlines(keepends=True)[::-1]
