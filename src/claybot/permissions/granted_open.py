"""Opening a path an agent names, if its grants allow: the one way file tools open files.

The path the model gives may pass through links that resolve inside the grants:
``check_path`` resolves it first and checks the grant. The resolved path is then
opened component by component (``open_beneath``), so a folder swapped for a link
after the check is refused instead of followed out of the grants. Paths in
``protected`` (the engine's own files, the user's keys) are refused whatever the
grants. Blocking: call it on a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from claybot.permissions.model import Permissions
from claybot.permissions.safe_open import open_beneath
from claybot.permissions.tags import check_path, granting_folder, is_within


def open_granted(
    permissions: Permissions,
    raw_path: str,
    access: Literal["read", "write"],
    flags: int,
    protected: Sequence[str] = (),
) -> tuple[str, int]:
    """The checked, resolved path and a descriptor of it, opened without following links
    (PermissionError when not granted or protected; OSError when it cannot be opened)."""
    path = check_path(permissions, raw_path, access)
    if any(is_within(path, secret) for secret in protected):
        raise PermissionError(
            f"{path} belongs to the engine (or holds keys): no agent may {access} it, "
            "whatever its grants"
        )
    root = granting_folder(permissions, path, access)
    assert root is not None  # check_path just found it granted
    return path, open_beneath(root, path, flags, make_folders=access == "write")
