"""Atomic file replacement: temp file, fsync, rename, fsync the directory.

A reader (or a process restarted after SIGKILL or power loss) sees either the old
file or the new one, never a half-written mix.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from claybot.durable.sync import sync_paths


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new directory entry durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a write may take only part)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_durably(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Append ``data`` and fsync it. A failed append (a full disk) is cut back off the
    file, so it never leaves a torn line for the next record to be glued onto."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        size = os.fstat(fd).st_size
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def json_bytes(value: Any) -> bytes:
    """How ClayBot's JSON files look on disk: indented, UTF-8, a final newline.

    orjson writes the text ``json.dumps(indent=2, ensure_ascii=False)`` would (a float
    may be spelled differently, with the same value), about twenty times faster: the
    standard library's indenting encoder is pure Python, and the periodic state flush
    writes every busy agent's state.json."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # what orjson does not take (a huge int, a key that is no string)
        return json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        # O_CREAT honours the umask; the caller's mode (0600 for secrets) must win.
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def atomic_write_json(path: Path, value: Any, *, mode: int = 0o600) -> None:
    atomic_write_bytes(path, json_bytes(value), mode=mode)


def atomic_write_many(files: Mapping[Path, bytes], *, mode: int = 0o600) -> None:
    """Replace many files atomically each, with two syncs in all instead of two per file.

    Every temp file is written, then one sync covers them all, then each is renamed
    into place and one more sync covers the directories. A crash leaves every file
    old or new (each on its own), and stray temp files at worst.
    """
    renames: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            renames.append((tmp, path))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            os.chmod(tmp, mode)
        sync_paths(tmp for tmp, _ in renames)
        for tmp, path in renames:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in renames:
            tmp.unlink(missing_ok=True)
        raise
    sync_paths({path.parent for _, path in renames})
