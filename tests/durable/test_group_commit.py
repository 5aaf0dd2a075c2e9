from __future__ import annotations

import asyncio
import os
import weakref
from pathlib import Path

import pytest

from claybot.durable.group_commit import GroupCommitWriter


async def test_appends_to_many_files_share_batches_and_all_land(tmp_path: Path) -> None:
    writer = GroupCommitWriter(max_open_files=8)  # far fewer than the files in one batch
    await writer.start()
    futures = [writer.append(tmp_path / f"f{n % 50}.log", f"{n}\n".encode()) for n in range(1000)]
    await asyncio.gather(*futures)
    await writer.close()
    assert writer.batches < 1000  # appends shared syncs
    for index in range(50):
        lines = (tmp_path / f"f{index}.log").read_text().split()
        assert lines == [str(n) for n in range(index, 1000, 50)]  # order kept per file


async def test_a_failed_append_fails_only_its_own_future_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    writer = GroupCommitWriter()
    await writer.start()
    bad = writer.append(tmp_path / "missing-dir" / "x.log", b"x\n")
    good = writer.append(tmp_path / "ok.log", b"ok\n")
    with pytest.raises(OSError):
        await bad
    await good
    await writer.append(tmp_path / "ok.log", b"again\n")
    await writer.close()
    assert (tmp_path / "ok.log").read_text() == "ok\nagain\n"


async def test_flush_waits_for_nowait_appends(tmp_path: Path) -> None:
    writer = GroupCommitWriter()
    await writer.start()
    for n in range(100):
        writer.append_nowait(tmp_path / "log", f"{n}\n".encode())
    await writer.flush()
    assert len((tmp_path / "log").read_text().split()) == 100
    await writer.close()


async def test_exclusive_rewrite_sees_no_batch_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "wal"
    writer = GroupCommitWriter()
    await writer.start()
    await writer.append(path, b"old\n")

    def rewrite() -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"compacted\n")
        os.replace(tmp, path)

    await writer.run_exclusive(rewrite, close=[path])
    await writer.append(path, b"new\n")  # goes to the new file, not the replaced one
    await writer.close()
    assert path.read_text() == "compacted\nnew\n"


class _TracedPath(type(Path())):  # type: ignore[misc]
    """A path a weak reference can follow (``PosixPath`` itself takes none)."""


async def test_nothing_of_a_written_batch_outlives_it(tmp_path: Path) -> None:
    """The writer idles between batches holding none of the last one (its paths, bytes,
    futures): what a load made must be free once the load ends, or it pins the memory
    allocator's arenas."""
    writer = GroupCommitWriter(journal=tmp_path / "journal.wal")
    await writer.start()
    path = _TracedPath(tmp_path / "history.jsonl")
    await writer.append(path, b"a record\n")
    writer.release(path)
    await writer.flush()
    await writer.checkpoint(lambda: None)  # the journal's own hold on the path ends here
    gone = weakref.ref(path)
    del path
    assert gone() is None
    await writer.close()
