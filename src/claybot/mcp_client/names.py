"""Tool names for MCP tools: apart from the SDK, so naming a tool loads nothing."""

from __future__ import annotations

import hashlib
import re

TOOL_NAME_MAX = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """``mcp__<server>__<tool>`` in [A-Za-z0-9_-], at most 64 characters, not in ``taken``.

    A name that had to be shortened, or that collides after sanitising, ends
    with a hash of the original tool name so that it stays distinct and stable.
    """
    name = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    if len(name) > TOOL_NAME_MAX or name in taken:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        name = f"{name[: TOOL_NAME_MAX - len(digest) - 1]}_{digest}"
    return name
