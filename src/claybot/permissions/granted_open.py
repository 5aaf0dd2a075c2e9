"""Opening a path an agent names, if its grants allow: the one way file tools open files.

The path the model gives may pass through links that resolve inside the grants:
``check_path`` resolves it first and checks the grant. The resolved path is then
opened component by component (``open_beneath``), so a folder swapped for a link
after the check is refused instead of followed out of the grants. What
``protected`` keeps (the engine's own files, the user's keys, other conversations'
files) is refused whatever the grants. Blocking: call it on a worker thread.
"""

from __future__ import annotations

from typing import Literal

from claybot.permissions.model import Permissions
from claybot.permissions.protected import ProtectedPaths
from claybot.permissions.safe_open import open_beneath
from claybot.permissions.tags import granting_folder, require_grant, resolved_path

NOTHING_PROTECTED = ProtectedPaths()


def open_granted(
    permissions: Permissions,
    raw_path: str,
    access: Literal["read", "write"],
    flags: int,
    protected: ProtectedPaths = NOTHING_PROTECTED,
) -> tuple[str, int]:
    """The checked, resolved path and a descriptor of it, opened without following links
    (PermissionError when not granted or protected; OSError when it cannot be opened)."""
    path = resolved_path(raw_path)
    # Before the grants: a protected path is refused with why, not with a hint to ask.
    refusal = protected.refusal(path, permissions, access)
    if refusal is not None:
        raise PermissionError(refusal)
    require_grant(permissions, path, access)
    root = granting_folder(permissions, path, access)
    assert root is not None  # require_grant just found it granted
    return path, open_beneath(root, path, flags, make_folders=access == "write")
