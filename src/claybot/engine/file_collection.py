"""Collecting the files no history references, now and then, off the event loop."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from claybot.files.collect import referenced_files
from claybot.files.store import FileStore

log = logging.getLogger(__name__)

COLLECT_EVERY_S = 3600.0


def collect_once(store: FileStore, agents_root: Path) -> int:
    """One mark and sweep; the files removed (none when a history cannot be read)."""
    try:
        referenced = referenced_files(agents_root)
    except OSError as exc:
        log.warning(
            "file collection skipped: a history could not be read",
            extra={"action": "files.collect_skipped", "error": str(exc)},
        )
        return 0
    removed = store.collect(referenced)
    if removed:
        log.info("files collected", extra={"action": "files.collected", "removed": removed})
    return removed


async def collect_forever(
    store: FileStore, agents_root: Path, every_s: float = COLLECT_EVERY_S
) -> None:
    detached, removed = await asyncio.to_thread(store.detach_links)
    if detached or removed:
        log.info(
            "stored files detached from agents' folders",
            extra={"action": "files.detached", "detached": detached, "removed": removed},
        )
    while True:
        await asyncio.sleep(every_s)
        await asyncio.to_thread(collect_once, store, agents_root)
