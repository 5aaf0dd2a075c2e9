"""Noticing TASK.md files added, edited or removed by hand.

``TaskFolders`` remembers each task folder's TASK.md version (mtime, size) and
reads again only the folders whose file changed. ``watch_task_files`` asks for a
rescan of the folders watchfiles reports, or of all of them every few seconds
where file watching is unavailable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from claybot.cron.store import TASK_FILE, CronStore, CronTask, TaskProblem
from claybot.cron.task import TaskFileError

log = logging.getLogger(__name__)

RESCAN_FALLBACK_S = 5.0  # polling interval when file watching is unavailable

# A folder's task, its problem, or None when its TASK.md is gone.
Change = tuple[str, CronTask | TaskProblem | None]


class TaskFolders:
    def __init__(self, store: CronStore) -> None:
        self._store = store
        self._versions: dict[str, tuple[int, int]] = {}  # folder -> its TASK.md (mtime, size)

    def note(self, name: str, version: tuple[int, int]) -> None:
        """The folder's TASK.md was read at this version."""
        self._versions[name] = version

    def changed(self, names: set[str] | None) -> list[Change]:
        """The folders among ``names`` (None: every folder) whose TASK.md changed, read
        again. Blocking: the scheduler runs it in a thread."""
        store = self._store
        if names is None:
            names = {path.name for path in store.task_dirs()} | set(self._versions)
        changes: list[Change] = []
        for name in sorted(names):
            directory = store.root / name
            version = store.version_of(directory)
            if version == self._versions.get(name):
                continue
            if version is None:
                self._versions.pop(name, None)
                changes.append((name, None))
                continue
            self._versions[name] = version
            try:
                changes.append((name, store.load(directory)))
            except (TaskFileError, OSError) as exc:
                changes.append((name, TaskProblem(str(directory / TASK_FILE), str(exc))))
        return changes


async def watch_task_files(
    root: Path, rescan: Callable[[set[str] | None], Awaitable[None]]
) -> None:
    """Until cancelled: ``rescan`` the task folders that change under ``root``."""
    try:
        from watchfiles import awatch

        def task_files(_: Any, path: str) -> bool:
            # A TASK.md, or a task folder appearing or going; not STATE.json,
            # MEMORY.md, files/ or the run ledger, which change at every run.
            parts = Path(path).relative_to(root).parts
            return len(parts) == 1 or (len(parts) == 2 and parts[1] == TASK_FILE)

        async for changes in awatch(root, watch_filter=task_files, debounce=200, step=50):
            names = {Path(path).relative_to(root).parts[0] for _, path in changes}
            await rescan({name for name in names if not name.startswith(".")})
    except asyncio.CancelledError:
        raise
    except Exception:
        log.warning(
            "watching cron files failed; polling instead",
            extra={"action": "cron.watch_fallback"},
            exc_info=True,
        )
        while True:
            await asyncio.sleep(RESCAN_FALLBACK_S)
            await rescan(None)
