"""Putting a message's files where its agent may read them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from claybot.files.reference import FileReference
from claybot.files.store import FileNotFound, FileStore


def place_files(store: FileStore, listed: Iterable[Any], folder: Path) -> list[dict[str, Any]]:
    """Each listed file reference placed in ``folder`` as ``<id start>-<name>`` (a hard
    link to the stored copy, or a copy across file systems), and its reference with the
    ``path`` it was placed at. A reference that is malformed or names no stored file is
    left out: the message goes on without it."""
    placed: list[dict[str, Any]] = []
    folder.mkdir(parents=True, exist_ok=True)
    for raw in listed:
        try:
            reference = FileReference.from_dict(raw)
            source = store.path_of(reference.id)
        except (KeyError, TypeError, ValueError, FileNotFound):
            continue
        target = folder / f"{reference.id[:12]}-{reference.name}"
        if not target.exists():
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        placed.append({**reference.to_dict(), "path": str(target)})
    return placed
