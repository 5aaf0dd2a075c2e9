"""Putting a message's files where its agent, and no other, may read them.

Each file is copied out of the store into the agent's own folder
(``<home>/received/<agent id>``), read-only. A copy, never a hard link: a link
shares the stored bytes, so a tool that wrote to it changed a content-addressed
file under its id (and every later message carrying the same content). The copy
is made under a temporary name and renamed, so a crash never leaves half a file
under the real name; it needs no fsync, since the store holds the durable bytes
and a lost copy is made again when the turn runs again.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NotRequired

from claybot.durable.disk_errors import heals_by_waiting
from claybot.files.reference import NAME_MAX_BYTES, FileReference, fit_name
from claybot.files.store import FileNotFound, FileStore
from claybot.kernel.event_types import FileReferenceJson

READ_ONLY = 0o400
PRIVATE_FOLDER = 0o700
ID_PREFIX_CHARS = 12
PLACED_NAME = re.compile(r"^[0-9a-f]{12}-")


class PlacedFile(FileReferenceJson):
    """A message's file as its turn and its ``user_message`` record carry it: the
    reference, with the ``path`` the agent reads it at, or the ``problem`` that kept
    it out (one of the two)."""

    path: NotRequired[str]
    problem: NotRequired[str]


def placed_name(reference: FileReference) -> str:
    """``<id start>-<name>``, within the file system's limit on a name's bytes."""
    prefix = f"{reference.id[:ID_PREFIX_CHARS]}-"
    return prefix + fit_name(reference.name, NAME_MAX_BYTES - len(prefix))


def place_files(store: FileStore, listed: Iterable[Any], folder: Path) -> list[PlacedFile]:
    """Each listed file reference copied into ``folder`` (see the module), and its
    reference with the ``path`` it was placed at, or with the ``problem`` that kept it
    out. A reference that is malformed or names no stored file is left out: the
    message goes on without it. An error waiting can heal (a full disk) raises: the
    turn waits for it; any other is that file's alone, and the agent is told why."""
    placed: list[PlacedFile] = []
    for raw in listed:
        try:
            reference = FileReference.from_dict(raw)
            source = store.path_of(reference.id)
        except (KeyError, TypeError, ValueError, FileNotFound):
            continue
        target = folder / placed_name(reference)
        try:
            _copy_once(source, target, reference.size)
        except OSError as exc:
            if heals_by_waiting(exc):
                raise
            problem = f"it could not be saved for you ({exc.strerror or exc})"
            placed.append(_placed(reference, problem=problem))
            continue
        placed.append(_placed(reference, path=str(target)))
    return placed


def _placed(
    reference: FileReference, *, path: str | None = None, problem: str | None = None
) -> PlacedFile:
    """The reference's fields, then ``path`` or ``problem``: the order its record writes."""
    json = reference.to_dict()
    placed = PlacedFile(
        id=json["id"],
        name=json["name"],
        mimeType=json["mimeType"],
        size=json["size"],
        sha256=json["sha256"],
    )
    if path is not None:
        placed["path"] = path
    if problem is not None:
        placed["problem"] = problem
    return placed


def _copy_once(source: Path, target: Path, size: int) -> None:
    """``source`` at ``target``, unless a whole copy is there already."""
    try:
        if target.stat().st_size == size:
            return
    except FileNotFoundError:
        pass
    folder = target.parent
    folder.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
    temporary = folder / f".{secrets.token_hex(8)}.part"
    try:
        shutil.copyfile(source, temporary)
        os.chmod(temporary, READ_ONLY)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def move_old_placements(workspace: Path, received: Path, agents_root: Path) -> int:
    """Move what engines before this one placed in the shared workspace
    (``<workspace>/files/<agent id>/<id start>-<name>``, readable by every agent there)
    into each agent's own folder, read-only; the count moved.

    Agents write in the workspace, so nothing there is trusted: only regular files of
    that shape, with no other link, in a folder named for an agent that exists, are
    moved, and every folder is opened without following a link (one swapped for a
    link to another agent's folder meanwhile is refused, not followed)."""
    try:
        old_root = _open_folder(str(workspace / "files"))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    moved = 0
    try:
        for name in os.listdir(old_root):
            if not (agents_root / name).is_dir():
                continue
            try:
                folder = _open_folder(name, old_root)
            except OSError:
                continue  # a file, a link, gone
            try:
                moved += _move_folder(folder, received / name)
            finally:
                os.close(folder)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=old_root)  # only if nothing else is left
    finally:
        os.close(old_root)
    with contextlib.suppress(OSError):
        os.rmdir(workspace / "files")
    return moved


def _open_folder(path: str, parent: int | None = None) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, dir_fd=parent)


def _move_folder(folder: int, own: Path) -> int:
    moved = 0
    for name in os.listdir(folder):
        if not PLACED_NAME.match(name):
            continue
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except OSError:
            continue  # a link, gone
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                continue  # not a copy the engine made
            os.fchmod(fd, READ_ONLY)
        finally:
            os.close(fd)
        own.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
        if (own / name).exists():
            os.unlink(name, dir_fd=folder)  # placed again since: the copy there stands
        else:
            os.rename(name, own / name, src_dir_fd=folder)
        moved += 1
    return moved
