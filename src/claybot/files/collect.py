"""Which files the histories still reference: what ``FileStore.collect`` must keep.

A mark-and-sweep: every ``history.jsonl`` under the agents' folder is read as bytes
and searched for the ids of file references (``"sha256":"<64 hex>"``), without parsing
a line. A history that cannot be read stops the collection: a file it may reference
is never removed because of an error.
"""

from __future__ import annotations

import re
from pathlib import Path

REFERENCE = re.compile(rb'"sha256":\s*"([0-9a-f]{64})"')
READ_CHUNK = 1 << 20


def referenced_files(agents_root: Path) -> set[str]:
    """The ids every history under ``agents_root`` references (OSError if one cannot
    be read: then nothing may be collected)."""
    found: set[str] = set()
    if not agents_root.is_dir():
        return found
    for history in agents_root.glob("*/history.jsonl"):
        with history.open("rb") as file:
            carry = b""
            while chunk := file.read(READ_CHUNK):
                data = carry + chunk
                found.update(match.decode() for match in REFERENCE.findall(data))
                carry = data[-128:]  # a reference cut by the chunk's end is found next time
    return found
