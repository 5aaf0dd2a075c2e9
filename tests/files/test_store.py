"""The file store: stored once by content, typed by content, capped, collected only
when no history references a file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from claybot.config.settings import FileSettings
from claybot.files.collect import referenced_files
from claybot.files.placement import placed_name
from claybot.files.reference import FileReference, safe_name
from claybot.files.store import FileNotFound, FileStore, FileTooLarge, StoreFull

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 64


def store_in(tmp_path: Path, **limits: int | float) -> FileStore:
    return FileStore(tmp_path / "files", FileSettings(**limits))


def test_the_same_content_is_stored_once(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    first = store.put(b"hello notes", "notes.txt")
    again = store.put(b"hello notes", "other name.txt")
    assert first.id == again.id == first.sha256 and len(first.id) == 64
    assert (first.name, again.name) == ("notes.txt", "other name.txt")
    assert first.mimeType == "text/plain" and first.size == 11
    blobs = [p for p in (tmp_path / "files").rglob("*") if p.is_file()]
    assert len(blobs) == 1 and blobs[0].read_bytes() == b"hello notes"
    assert oct(blobs[0].stat().st_mode & 0o777) == "0o600"
    assert store.read(first.id) == b"hello notes"
    assert store.used_bytes() == 11


def test_the_type_comes_from_the_content_not_the_name(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    assert store.put(ELF, "x.png").mimeType == "application/x-executable"
    assert store.put(PNG, "photo.exe").mimeType == "image/png"
    assert store.put(b"\x00\x01\x02binary", "notes.txt").mimeType == "application/octet-stream"
    assert store.put("Grüße".encode(), "a").mimeType == "text/plain"


def test_names_are_names_not_paths(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    assert store.put(b"a", "../../etc/passwd").name == "passwd"
    assert store.put(b"b", "..").name == "file"
    assert store.put(b"c", "line\nbreak.txt").name == "line_break.txt"


def test_caps_and_quota_are_clear_413s(tmp_path: Path) -> None:
    store = store_in(tmp_path, max_file_bytes=1024, max_message_bytes=2048, quota_bytes=1024**2)
    with pytest.raises(FileTooLarge) as too_big:
        store.put(b"x" * 1025, "big.bin")
    assert too_big.value.status == 413 and "files.maxFileBytes" in str(too_big.value)
    with pytest.raises(FileTooLarge) as message:
        store.check_message([1000, 1000, 100])
    assert "files.maxMessageBytes" in str(message.value)
    full = store_in(tmp_path / "other", max_file_bytes=1024**2, quota_bytes=1024**2)
    full.put(b"a" * (1024**2 - 10), "most")
    with pytest.raises(StoreFull) as quota:
        full.put(b"b" * 20, "more")
    assert quota.value.status == 413 and "files.quotaBytes" in str(quota.value)
    assert full.put(b"a" * (1024**2 - 10), "again").size == 1024**2 - 10  # stored already


def test_unknown_ids_are_not_found(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    for bad in ("0" * 64, "../../etc/passwd", "ABC"):
        with pytest.raises(FileNotFound):
            store.path_of(bad)


def test_collection_keeps_every_referenced_file(tmp_path: Path) -> None:
    store = store_in(tmp_path, collect_after_s=60)
    kept = store.put(b"referenced", "a.txt")
    orphan = store.put(b"orphan", "b.txt")
    young = store.put(b"young orphan", "c.txt")
    old = time.time() - 3600
    for reference in (kept, orphan):
        os.utime(store.path_of(reference.id), (old, old))
    agent = tmp_path / "agents" / "a1"
    agent.mkdir(parents=True)
    record = {"type": "user_message", "at": 1, "text": "see", "files": [kept.to_dict()]}
    (agent / "history.jsonl").write_text("x" * 2_000_000 + "\n" + json.dumps(record) + "\n")
    referenced = referenced_files(tmp_path / "agents")
    assert referenced == {kept.id}
    assert store.collect(referenced) == 1  # the old orphan only
    assert store.exists(kept.id) and store.exists(young.id) and not store.exists(orphan.id)
    assert store.used_bytes() == kept.size + young.size


def test_links_an_older_engine_placed_are_detached_and_a_changed_file_removed(
    tmp_path: Path,
) -> None:
    """Older engines placed a message's file as a hard link in the shared workspace, so
    a tool writing there changed the stored file under its id."""
    store = store_in(tmp_path)
    kept = store.put(b"kept as it was", "a.txt")
    changed = store.put(b"changed through the link", "b.txt")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.link(store.path_of(kept.id), workspace / "a.txt")
    os.link(store.path_of(changed.id), workspace / "b.txt")
    with (workspace / "b.txt").open("ab") as link:
        link.write(b" and more")

    assert store.detach_links() == (1, 1)
    assert store.path_of(kept.id).stat().st_nlink == 1
    assert store.read(kept.id) == b"kept as it was"
    (workspace / "a.txt").write_bytes(b"written later")  # the workspace copy alone
    assert store.read(kept.id) == b"kept as it was"
    with pytest.raises(FileNotFound):
        store.path_of(changed.id)
    assert store.used_bytes() == len(b"kept as it was")
    # The original sent again is the stored file again.
    assert store.put(b"changed through the link", "b.txt").id == changed.id
    assert store.read(changed.id) == b"changed through the link"
    assert store.detach_links() == (0, 0)


def test_a_stored_file_changed_in_size_is_written_again_by_the_next_put(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    stored = store.put(b"original bytes", "a.txt")
    with store.path_of(stored.id).open("ab") as blob:
        blob.write(b"!")
    store.put(b"original bytes", "a.txt")
    assert store.read(stored.id) == b"original bytes"
    assert store.used_bytes() == len(b"original bytes")


def test_a_long_name_is_cut_to_what_a_file_system_takes_before_its_extension() -> None:
    wide = safe_name("é" * 300 + ".pdf")
    assert len(wide.encode()) <= 255 and wide.endswith("é.pdf")
    reference = FileReference("ab" * 32, "x" * 254 + ".tar.gz", "application/gzip", 1)
    placed = placed_name(reference)
    assert len(placed.encode()) <= 255 and placed.startswith("abababababab-x")
    assert placed.endswith("x.gz")
    no_extension = placed_name(FileReference("ab" * 32, "y" * 300, "text/plain", 1))
    assert len(no_extension.encode()) == 255
