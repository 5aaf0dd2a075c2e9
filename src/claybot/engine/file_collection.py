"""Collecting the files no history references, now and then, off the event loop."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from claybot.config.home import HomePaths
from claybot.files.collect import referenced_files
from claybot.files.placement import move_old_placements
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


def repair_old_placements(store: FileStore, paths: HomePaths) -> None:
    """Once at start: what engines before copies placed (hard links to the stored files,
    in the workspace every agent shares) made harmless. The store's files are detached
    from the links (each checked against its id), then the placed files moved into
    their agents' own folders."""
    detached, removed = store.detach_links()
    moved = move_old_placements(paths.workspace, paths.received, paths.agents)
    if detached or removed or moved:
        log.info(
            "files placed by an older engine made private",
            extra={"action": "files.repaired", "detached": detached, "removed": removed,
                   "moved": moved},
        )  # fmt: skip


async def collect_forever(
    store: FileStore, paths: HomePaths, every_s: float = COLLECT_EVERY_S
) -> None:
    try:
        await asyncio.to_thread(repair_old_placements, store, paths)
    except OSError as exc:  # the next start tries again; collection goes on meanwhile
        log.error(
            "files placed by an older engine could not all be made private: %s", exc,
            extra={"action": "files.repair_failed"},
        )  # fmt: skip
    agents_root = paths.agents
    while True:
        await asyncio.sleep(every_s)
        await asyncio.to_thread(collect_once, store, agents_root)
