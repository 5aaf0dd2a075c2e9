"""Cron tasks on disk: ``<home>/cron/<slug>/`` with TASK.md, MEMORY.md, STATE.json, files/.

The files are the source of truth: a TASK.md edited by hand is picked up by the
next scan, and one that is invalid is reported with its path and reason while
the other tasks keep running. Blocking calls; the scheduler runs them in a thread.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypedDict

from claybot.cron.task import (
    CronTaskSpec,
    GateFields,
    TaskFileError,
    parse_task_file,
    render_task_file,
    slugify,
)
from claybot.durable.atomic import atomic_write_bytes, atomic_write_json
from claybot.kernel.clock import from_ms
from claybot.kernel.errors import InvalidInput
from claybot.scheduling.schedule import CronSchedule, ScheduleError

TASK_FILE = "TASK.md"
MEMORY_FILE = "MEMORY.md"
STATE_FILE = "STATE.json"
FILES_DIR = "files"
EMPTY_MEMORY = "No memory yet.\n"
MAX_TASK_FILE_BYTES = 256 * 1024
MAX_MEMORY_BYTES = 256 * 1024


class CronTaskFields(TypedDict):
    """A task as the API shows it (``wire.cron.CronTask``): its front matter in the
    file's order, with the zone it runs in, where it lives and its prompt."""

    taskId: str
    name: str
    schedule: str
    timezone: str
    enabled: bool
    description: str
    deleteAfterRun: bool
    agentId: str | None
    gate: GateFields | None
    misfire: Literal["skip", "run-once"]
    overlap: Literal["skip", "queue"]
    createdBy: str | None
    slug: str
    path: str
    prompt: str


class CronTaskListing(CronTaskFields):
    """A task as ``GET /v1/engine/cron/tasks`` lists it (``wire.cron.CronTaskListing``)."""

    nextRunAt: str | None
    lastRun: dict[str, Any] | None  # the ledger's last finished run, as it recorded it
    running: bool
    id: str
    lastRunAt: str | None


@dataclass(frozen=True)
class CronTask:
    spec: CronTaskSpec
    prompt: str
    directory: Path
    schedule: CronSchedule
    version: tuple[int, int]  # (mtime_ns, size) of TASK.md: what a rescan compares
    files_path: str = ""  # files/ resolved once at load (runs fire often; realpath is slow)

    @property
    def id(self) -> str:
        return self.spec.taskId

    @property
    def slug(self) -> str:
        return self.directory.name

    @property
    def files_dir(self) -> Path:
        return self.directory / FILES_DIR

    def to_dict(self) -> CronTaskFields:
        spec = self.spec
        return {
            "taskId": spec.taskId,
            "name": spec.name,
            "schedule": spec.schedule,
            "timezone": self.schedule.timezone,
            "enabled": spec.enabled,
            "description": spec.description,
            "deleteAfterRun": spec.deleteAfterRun,
            "agentId": spec.agentId,
            "gate": spec.gate.fields() if spec.gate else None,
            "misfire": spec.misfire,
            "overlap": spec.overlap,
            "createdBy": spec.createdBy,
            "slug": self.slug,
            "path": str(self.directory / TASK_FILE),
            "prompt": self.prompt,
        }

    def listing(
        self, last_run: dict[str, Any] | None, next_run: datetime | None, running: bool
    ) -> CronTaskListing:
        """The task as ``GET /v1/engine/cron/tasks`` lists it, with its next and last
        run. ``id`` and ``lastRunAt`` are seed 000's names (the original ClayBot
        dashboard reads them): the task's id, and the instant of its last run."""
        return {
            **self.to_dict(),
            "nextRunAt": next_run.isoformat() if next_run else None,
            "lastRun": last_run,
            "running": running,
            "id": self.id,
            "lastRunAt": from_ms(int(last_run["at"])).isoformat() if last_run else None,
        }


@dataclass(frozen=True)
class TaskProblem:
    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


class CronStore:
    def __init__(self, root: Path, default_timezone: str = "UTC") -> None:
        self.root = root
        self.default_timezone = default_timezone

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def version_of(self, directory: Path) -> tuple[int, int] | None:
        try:
            stat = (directory / TASK_FILE).stat()
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size)

    def task_dirs(self) -> list[Path]:
        try:
            with os.scandir(self.root) as entries:
                names = sorted(
                    entry.name for entry in entries if entry.name[0] != "." and entry.is_dir()
                )
        except FileNotFoundError:
            return []
        return [self.root / name for name in names]

    def load(self, directory: Path, resolved_root: str | None = None) -> CronTask:
        path = directory / TASK_FILE
        version = self.version_of(directory)
        if version is None:
            raise TaskFileError("TASK.md is missing")
        if version[1] > MAX_TASK_FILE_BYTES:
            raise TaskFileError(f"TASK.md is larger than {MAX_TASK_FILE_BYTES} bytes")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise TaskFileError("TASK.md is not UTF-8 text") from exc
        spec, prompt = parse_task_file(text)
        try:
            schedule = CronSchedule.parse(spec.schedule, spec.timezone or self.default_timezone)
        except ScheduleError as exc:
            raise TaskFileError(str(exc)) from exc
        # Granted to the task's agent. Built from the resolved root rather than resolved
        # itself (realpath costs ~50 us): if files/ is a link, accesses through it
        # resolve elsewhere and are refused, so the shortcut can only deny, never widen.
        root = resolved_root or os.path.realpath(self.root)
        files_path = os.path.join(root, directory.name, FILES_DIR)
        return CronTask(spec, prompt, directory, schedule, version, files_path)

    def scan(self) -> tuple[dict[str, CronTask], list[TaskProblem]]:
        tasks: dict[str, CronTask] = {}
        problems: list[TaskProblem] = []
        resolved_root = os.path.realpath(self.root)
        for directory in self.task_dirs():
            try:
                task = self.load(directory, resolved_root)
            except (TaskFileError, OSError) as exc:
                problems.append(TaskProblem(str(directory / TASK_FILE), str(exc)))
                continue
            if task.id in tasks:
                first = tasks[task.id].directory / TASK_FILE
                problems.append(
                    TaskProblem(str(directory / TASK_FILE), f"taskId {task.id} is also in {first}")
                )
                continue
            tasks[task.id] = task
        return tasks, problems

    # -- changes ----------------------------------------------------------------

    def create(self, spec: CronTaskSpec, prompt: str) -> CronTask:
        _require_prompt(prompt)  # before anything is written: no half-made task folder
        self.ensure()
        base = slugify(spec.name)
        slug, number = base, 1
        while (self.root / slug).exists():
            number += 1
            slug = f"{base}-{number}"
        directory = self.root / slug
        (directory / FILES_DIR).mkdir(parents=True)
        atomic_write_bytes(directory / MEMORY_FILE, EMPTY_MEMORY.encode())
        atomic_write_json(directory / STATE_FILE, {})
        self.write_spec(directory, spec, prompt)
        return self.load(directory)

    def write_spec(self, directory: Path, spec: CronTaskSpec, prompt: str) -> None:
        _require_prompt(prompt)
        atomic_write_bytes(directory / TASK_FILE, render_task_file(spec, prompt).encode())

    def delete(self, task: CronTask) -> None:
        shutil.rmtree(task.directory, ignore_errors=True)

    def read_memory(self, task: CronTask) -> str:
        try:
            return (task.directory / MEMORY_FILE).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return EMPTY_MEMORY

    def write_memory(self, task: CronTask, content: str, *, append: bool) -> int:
        text = (self.read_memory(task).rstrip("\n") + "\n" + content) if append else content
        data = text.encode()
        if len(data) > MAX_MEMORY_BYTES:
            raise ValueError(
                f"MEMORY.md would be {len(data)} bytes; the limit is {MAX_MEMORY_BYTES}"
            )
        atomic_write_bytes(task.directory / MEMORY_FILE, data)
        return len(data)

    def read_state(self, task: CronTask) -> dict[str, Any]:
        """A dict: STATE.json is the task's own, read as it is on disk ({} if unreadable)."""
        try:
            value = json.loads((task.directory / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def write_state(self, task: CronTask, state: dict[str, Any]) -> None:
        if task.directory.is_dir():  # deleted meanwhile: nothing to record
            atomic_write_json(task.directory / STATE_FILE, state)


def _require_prompt(prompt: str) -> None:
    """A TASK.md whose prompt is only blanks would not load again (the file's prompt is
    what follows the front matter, stripped): refused before it is written."""
    if not prompt.strip():
        raise InvalidInput("the prompt is empty", field="prompt")
