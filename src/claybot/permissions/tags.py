"""Permission tags (``@read:/abs``, ``@write:/abs``, ``@network``) and granting them.

Pure: no file system access except in ``resolve`` (realpath), which is passed in
so tests can supply their own. Write implies read. Paths are resolved, symlinks
and ``..`` included, before they are stored or compared, so a grant can never be
widened through a link.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from claybot.kernel.errors import InvalidInput
from claybot.permissions.model import Permissions

Access = Literal["read", "write", "network"]
MAX_PATH_CHARS = 4096

Resolve = Callable[[str], str]


class PermissionTagError(InvalidInput, ValueError):
    """A permission tag that is malformed or cannot be granted."""

    code = "invalid_permission"


@dataclass(frozen=True)
class PermissionTag:
    access: Access
    path: str | None = None  # absolute and resolved for read/write; None for network

    def __str__(self) -> str:
        return "@network" if self.access == "network" else f"@{self.access}:{self.path}"


def _clean_path(raw: str, resolve: Resolve) -> str:
    if not raw:
        raise PermissionTagError("the path is empty")
    if len(raw) > MAX_PATH_CHARS:
        raise PermissionTagError(f"the path is longer than {MAX_PATH_CHARS} characters")
    if any(ord(char) < 32 or ord(char) == 127 for char in raw):
        raise PermissionTagError("the path contains control characters")
    if not raw.startswith("/"):
        raise PermissionTagError(f"the path must be absolute, got {raw!r}")
    try:
        return resolve(raw)
    except OSError as exc:
        # realpath only fails when a link it met changed under it (readlink on what is
        # no longer a link): the path is being changed right now.
        raise PermissionTagError(
            f"the path {raw!r} changed while it was resolved ({exc.strerror}); retry"
        ) from None


def parse_tag(tag: str, resolve: Resolve = os.path.realpath) -> PermissionTag:
    """``@network``, ``@read:/abs/path`` or ``@write:/abs/path``."""
    text = tag.strip()
    if text == "@network":
        return PermissionTag("network")
    for access in ("read", "write"):
        prefix = f"@{access}:"
        if text.startswith(prefix):
            return PermissionTag(access, _clean_path(text[len(prefix) :], resolve))
    raise PermissionTagError(
        f"unknown permission {tag!r}: use @network, @read:/path or @write:/path"
    )


def is_within(path: str, directory: str) -> bool:
    """Whether the resolved ``path`` is ``directory`` or inside it (not a mere prefix)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _folders(permissions: Permissions, access: Literal["read", "write"]) -> list[str]:
    directories = list(permissions.writeDirs)
    if access == "read":
        directories += permissions.readDirs
    return directories


def grants(permissions: Permissions, tag: PermissionTag) -> bool:
    """Whether ``permissions`` already cover ``tag`` (write implies read)."""
    if tag.access == "network":
        return permissions.network
    assert tag.path is not None
    return any(is_within(tag.path, directory) for directory in _folders(permissions, tag.access))


def granting_folder(
    permissions: Permissions, resolved: str, access: Literal["read", "write"]
) -> str | None:
    """The deepest granted folder that holds the resolved path, if any.

    The deepest, because the file tools create missing folders only below it.
    """
    holding = [folder for folder in _folders(permissions, access) if is_within(resolved, folder)]
    return max(holding, key=len, default=None)


def apply_grant(permissions: Permissions, tag: PermissionTag) -> Permissions:
    """Permissions with ``tag`` added; a write grant also grants read."""
    if grants(permissions, tag):
        return permissions
    if tag.access == "network":
        return permissions.model_copy(update={"network": True})
    assert tag.path is not None
    read_dirs = list(permissions.readDirs)
    write_dirs = list(permissions.writeDirs)
    if tag.access == "write":
        write_dirs.append(tag.path)
    if tag.path not in read_dirs:
        read_dirs.append(tag.path)
    return permissions.model_copy(update={"readDirs": read_dirs, "writeDirs": write_dirs})


def granted_tags(permissions: Permissions) -> list[str]:
    """What an agent was granted, as tags: a write grant once (it implies read)."""
    tags = [f"@write:{folder}" for folder in permissions.writeDirs]
    tags += [f"@read:{folder}" for folder in permissions.readDirs
             if folder not in permissions.writeDirs]  # fmt: skip
    if permissions.network:
        tags.append("@network")
    return tags


def revoked_tag(tag: str) -> PermissionTag:
    """A tag to take back: its path as held (normalised, not resolved again, so a folder
    since replaced by a link is still the one named)."""
    return parse_tag(tag, resolve=os.path.normpath)


def remove_grant(permissions: Permissions, tag: PermissionTag) -> Permissions:
    """Permissions without ``tag``: taking read back takes write too (write implies
    read); taking write back leaves read. Only the folder named is taken back, not a
    grant of a folder above or below it."""
    if tag.access == "network":
        return permissions.model_copy(update={"network": False})
    write_dirs = [folder for folder in permissions.writeDirs if folder != tag.path]
    read_dirs = list(permissions.readDirs)
    if tag.access == "read":
        read_dirs = [folder for folder in read_dirs if folder != tag.path]
    return permissions.model_copy(update={"readDirs": read_dirs, "writeDirs": write_dirs})


def subset_of(tags: Iterable[PermissionTag], holder: Permissions) -> list[PermissionTag]:
    """The tags ``holder`` does not have (empty when a caller may pass them all on)."""
    return [tag for tag in tags if not grants(holder, tag)]


def check_path(
    permissions: Permissions,
    path: str,
    access: Literal["read", "write"],
    resolve: Resolve = os.path.realpath,
) -> str:
    """The resolved path if ``access`` is granted, else PermissionError naming the tag."""
    resolved = resolved_path(path, resolve)
    require_grant(permissions, resolved, access)
    return resolved


def resolved_path(path: str, resolve: Resolve = os.path.realpath) -> str:
    """An absolute path an agent named, resolved (PermissionTagError if malformed)."""
    return _clean_path(path, resolve)


def require_grant(
    permissions: Permissions, resolved: str, access: Literal["read", "write"]
) -> None:
    """PermissionError naming the tag to ask for, unless ``access`` to ``resolved`` is granted."""
    if not grants(permissions, PermissionTag(access, resolved)):
        raise PermissionError(
            f"{access} access to {resolved} is not granted; request @{access}:{resolved}"
        )
