"""The writer's journal: appends survive losing the files' unsynced tails."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import pytest

from claybot.durable.group_commit import GroupCommitWriter, replay_journal
from claybot.durable.jsonl import encode_record, read_jsonl


async def _write(root: Path, appends: list[tuple[str, bytes]]) -> Path:
    journal = root / "wal"
    writer = GroupCommitWriter(journal=journal, root=root)
    await writer.start()
    for name, data in appends:
        await writer.append(root / name, data)
    await writer.close()
    return journal


async def test_replay_restores_appends_a_file_lost(tmp_path: Path) -> None:
    journal = await _write(
        tmp_path,
        [("a.log", b"one\n"), ("b.log", b"x\n"), ("a.log", b"two\n"), ("a.log", b"three\n")],
    )
    assert (tmp_path / "a.log").read_bytes() == b"one\ntwo\nthree\n"
    # Power loss: the file's unsynced tail is gone (and a torn half-line is left).
    (tmp_path / "a.log").write_bytes(b"one\ntw")
    (tmp_path / "b.log").unlink()
    assert replay_journal(journal, tmp_path) == 2
    assert (tmp_path / "a.log").read_bytes() == b"one\ntwo\nthree\n"
    assert (tmp_path / "b.log").read_bytes() == b"x\n"
    assert replay_journal(journal, tmp_path) == 0  # idempotent: nothing left to repair


async def test_files_that_are_intact_are_not_rewritten(tmp_path: Path) -> None:
    journal = await _write(tmp_path, [("a.log", b"one\n")])
    before = os.stat(tmp_path / "a.log").st_mtime_ns
    assert replay_journal(journal, tmp_path) == 0
    assert os.stat(tmp_path / "a.log").st_mtime_ns == before


async def test_checkpoint_drops_redo_records_and_keeps_the_owners(tmp_path: Path) -> None:
    journal = tmp_path / "wal"
    writer = GroupCommitWriter(journal=journal, root=tmp_path)
    await writer.start()
    await writer.append(tmp_path / "a.log", b"one\n")
    await writer.append(journal, encode_record({"op": "message", "id": "m1"}))
    assert [r["op"] for r in read_jsonl(journal).records] == ["redo", "message"]

    def keep_only_pending() -> None:
        journal.write_bytes(encode_record({"op": "message", "id": "m1"}))

    await writer.checkpoint(keep_only_pending)
    await writer.append(tmp_path / "a.log", b"two\n")
    await writer.close()
    records = read_jsonl(journal).records
    assert [r["op"] for r in records] == ["message", "redo"]
    assert base64.b64decode(records[1]["data"]) == b"two\n" and records[1]["off"] == 4


async def test_a_batch_syncs_the_journal_alone_and_the_checkpoint_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The journal's point: one fdatasync a batch, however many files it wrote (their
    # bytes are in the journal's redo records until a checkpoint syncs them).
    synced: list[list[str]] = []
    checkpointed: list[set[str]] = []

    def sync(fds: list[int]) -> None:
        synced.append([os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) for fd in fds])

    def sync_files(paths: set[Path]) -> None:
        checkpointed.append({path.name for path in paths})

    monkeypatch.setattr(GroupCommitWriter, "_sync", staticmethod(sync))
    monkeypatch.setattr("claybot.durable.group_commit.sync_paths", sync_files)
    journal = tmp_path / "wal"
    writer = GroupCommitWriter(journal=journal, root=tmp_path)
    await writer.start()
    await asyncio.gather(
        writer.append(tmp_path / "a.log", b"one\n"),
        writer.append(tmp_path / "b.log", b"two\n"),
        writer.append(journal, encode_record({"op": "message", "id": "m1"})),
    )
    await writer.append(tmp_path / "a.log", b"three\n")
    assert synced and all(names == ["wal"] for names in synced)
    await writer.checkpoint(lambda: None)
    assert checkpointed == [{"a.log", "b.log"}]
    await writer.close()


def test_replay_never_writes_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    outside = tmp_path / "outside.log"
    journal = root / "wal"
    evil = {
        "op": "redo",
        "path": "../outside.log",
        "off": 0,
        "data": base64.b64encode(b"pwned\n").decode(),
    }
    journal.write_bytes(encode_record(evil))
    assert replay_journal(journal, root) == 0
    assert not outside.exists()


def test_a_gap_is_reported_and_the_file_left_alone(tmp_path: Path) -> None:
    journal = tmp_path / "wal"
    record = {
        "op": "redo",
        "path": "a.log",
        "off": 100,
        "data": base64.b64encode(b"late\n").decode(),
    }
    journal.write_bytes(encode_record(record))
    (tmp_path / "a.log").write_bytes(b"short\n")
    assert replay_journal(journal, tmp_path) == 0
    assert (tmp_path / "a.log").read_bytes() == b"short\n"
