"""Opening a checked path without following a symbolic link at any level.

``check_path`` resolves a path (links and ``..``) and checks it against the grants;
the file is opened afterwards. A folder on the way that is swapped for a link in
between (another agent's ``exec`` can do that in a shared workspace) would send a
plain ``open`` outside the grants: ``O_NOFOLLOW`` only covers the last component. A
probe got 41 of 300 writes out that way.

So the resolved path is walked one component at a time, each folder opened
relative to the previous one with ``O_NOFOLLOW | O_DIRECTORY`` and the file itself
with ``O_NOFOLLOW``. The path was resolved, so it held no link when it was checked:
a link met now means it changed since, and the open is refused with ``LinkRefused``.
The walk starts at ``/`` rather than at the granted folder, so the granted folder
itself cannot be swapped either. It costs one ``openat`` per component, and unlike
``openat2(RESOLVE_NO_SYMLINKS)`` it needs no particular kernel or a second code path.

Pure of engine imports: only ``os``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FOLDER_MODE = 0o777  # before the umask, as mkdir(1) and Path.mkdir


class LinkRefused(PermissionError):
    """A component of a checked path is a symbolic link now: it changed after the check."""

    def __init__(self, component: str) -> None:
        super().__init__(
            f"{component} was a symbolic link when it was opened, though not when the path "
            "was checked: something is changing it, so nothing was opened; check the path "
            "and retry"
        )
        self.component = component


def open_beneath(
    root: str, path: str, flags: int, mode: int = 0o644, *, make_folders: bool = False
) -> int:
    """A descriptor of ``path``, a regular file; no link is followed on the way.

    ``path`` is absolute and resolved (what ``check_path`` returns) and lies in
    ``root``, the granted folder. With ``make_folders``, missing folders below
    ``root`` are created (never ``root`` or anything above it, which the grant does
    not cover). ``LinkRefused`` if any component is a link; ``OSError`` otherwise.
    """
    parts = _components(path)
    root_parts = _components(root)
    root_depth = len(root_parts)
    if parts[:root_depth] != root_parts or not parts:
        raise ValueError(f"{path!r} is not a file inside {root!r}")
    folder = os.open("/", DIRECTORY_FLAGS)
    try:
        for depth, name in enumerate(parts[:-1], start=1):
            create = make_folders and depth > root_depth
            child = _open_folder(folder, name, _joined(parts[:depth]), create)
            os.close(folder)
            folder = child
        return _open_file(folder, parts[-1], path, flags, mode)
    finally:
        os.close(folder)


def _components(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"{path!r} is not absolute")
    parts = [part for part in path.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"{path!r} is not resolved")
    return parts


def _joined(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def _open_folder(parent: int, name: str, shown: str, create: bool) -> int:
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(errno.ENOENT, "no such folder", shown) from None
    except OSError as exc:
        _refuse_if_link(parent, name, shown, exc)
        raise
    # Made by someone else meanwhile: then opened (or refused) like any other.
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, FOLDER_MODE, dir_fd=parent)
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as exc:
        _refuse_if_link(parent, name, shown, exc)
        raise


def _open_file(parent: int, name: str, shown: str, flags: int, mode: int) -> int:
    # O_NONBLOCK: opening a FIFO must not hang the worker thread until a writer comes.
    try:
        fd = os.open(
            name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=parent
        )
    except OSError as exc:
        _refuse_if_link(parent, name, shown, exc)
        if isinstance(exc, FileNotFoundError):
            raise FileNotFoundError(errno.ENOENT, "no such file", shown) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_if_link(parent: int, name: str, shown: str, error: OSError) -> None:
    """Turn a failed no-follow open into ``LinkRefused`` when a link was the reason."""
    if error.errno in (errno.ELOOP, errno.EMLINK):
        raise LinkRefused(shown) from None  # O_NOFOLLOW met a link (EMLINK on the BSDs)
    if error.errno != errno.ENOTDIR:
        return
    # O_DIRECTORY|O_NOFOLLOW fails with ENOTDIR on a link and on a file alike. What is
    # there a moment later tells them apart; a folder there now means it is being swapped.
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode) or stat.S_ISDIR(mode):
        raise LinkRefused(shown) from None
    raise NotADirectoryError(errno.ENOTDIR, "not a folder", shown) from None
