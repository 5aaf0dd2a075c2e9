"""Heartbeat tasks on disk: ``<home>/heartbeat/<id>.md`` (title, optional gate; body = prompt).

One global ``.heartbeat-state.json`` records ``lastRunAt`` (seed 000: one
timestamp for all tasks) and the beat in progress, so a restart finishes that
beat instead of starting another. Blocking calls; the scheduler runs them in a thread.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from claybot.cron.task import Gate, GateFields, slugify
from claybot.durable.atomic import atomic_write_bytes, atomic_write_json
from claybot.kernel.errors import Conflict, InvalidInput, NotFound
from claybot.kernel.frontmatter import FrontMatterError, join_front_matter, split_front_matter

STATE_FILE = ".heartbeat-state.json"
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_FILE_BYTES = 64 * 1024


class HeartbeatTaskError(InvalidInput, ValueError):
    """A task that cannot be used: bad input for a new one, or a file that does not load."""


class HeartbeatTaskExists(Conflict, HeartbeatTaskError):
    code = "task_exists"

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"heartbeat task {task_id!r} exists; pass overwrite to replace it", field="id"
        )


class HeartbeatTaskNotFound(NotFound, LookupError):
    code = "task_not_found"

    def __init__(self, task_id: str, message: str | None = None) -> None:
        super().__init__(message or f"no heartbeat task with id {task_id!r}", field="taskId")
        self.task_id = task_id


def _id_problem(task_id: str) -> str:
    return f"heartbeat task id {task_id!r}: use lowercase letters, digits and dashes"


class HeartbeatFront(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=200)
    gate: Gate | None = None
    # The agent whose tool call made the task: its gate runs with that agent's grants.
    createdBy: str | None = Field(default=None, min_length=1, max_length=64)


class HeartbeatTaskFields(TypedDict):
    """A task as the API shows it (``wire.heartbeat.HeartbeatTask``)."""

    id: str
    title: str
    prompt: str
    gate: GateFields | None
    path: str
    lastRunAt: str | None  # the last beat, one time for all tasks


@dataclass(frozen=True)
class HeartbeatTask:
    id: str
    title: str
    prompt: str
    gate: Gate | None
    path: Path
    created_by: str | None = None

    def to_dict(self, last_run_at: str | None = None) -> HeartbeatTaskFields:
        return {
            "id": self.id,
            "title": self.title,
            "prompt": self.prompt,
            "gate": self.gate.fields() if self.gate else None,
            "path": str(self.path),
            "lastRunAt": last_run_at,
        }


@dataclass(frozen=True)
class HeartbeatProblem:
    path: str
    reason: str


class HeartbeatStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def gate_folder(self) -> Path:
        """Where the owner's gates run (read-write): not the task files themselves."""
        return self.root / "files"

    def _path(self, task_id: str) -> Path:
        if not ID_PATTERN.match(task_id):
            raise HeartbeatTaskError(_id_problem(task_id), field="id")
        return self.root / f"{task_id}.md"

    def load(self, path: Path) -> HeartbeatTask:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise HeartbeatTaskError(f"larger than {MAX_FILE_BYTES} bytes")
        try:
            raw, prompt = split_front_matter(path.read_text(encoding="utf-8"))
            front = HeartbeatFront.model_validate(raw)
        except (FrontMatterError, UnicodeDecodeError) as exc:
            raise HeartbeatTaskError(str(exc)) from exc
        except ValidationError as exc:
            raise HeartbeatTaskError(
                "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            ) from exc
        if not prompt:
            raise HeartbeatTaskError("the prompt (the text after the front matter) is empty")
        return HeartbeatTask(path.stem, front.title, prompt, front.gate, path, front.createdBy)

    def scan(self) -> tuple[list[HeartbeatTask], list[HeartbeatProblem]]:
        tasks: list[HeartbeatTask] = []
        problems: list[HeartbeatProblem] = []
        try:
            paths = sorted(self.root.glob("*.md"))
        except FileNotFoundError:
            paths = []
        for path in paths:
            try:
                tasks.append(self.load(path))
            except (HeartbeatTaskError, OSError) as exc:
                problems.append(HeartbeatProblem(str(path), str(exc)))
        return tasks, problems

    def add(
        self,
        title: str,
        prompt: str,
        *,
        task_id: str | None = None,
        gate: Gate | None = None,
        overwrite: bool = False,
        created_by: str | None = None,
    ) -> HeartbeatTask:
        task_id = task_id or slugify(title)
        path = self._path(task_id)
        if path.exists() and not overwrite:
            raise HeartbeatTaskExists(task_id)
        if not prompt.strip():
            raise HeartbeatTaskError("the prompt is empty", field="prompt")
        self.root.mkdir(parents=True, exist_ok=True)
        fields: dict[str, Any] = {"title": title}
        if gate is not None:
            fields["gate"] = gate.model_dump()
        if created_by is not None:
            fields["createdBy"] = created_by
        atomic_write_bytes(path, join_front_matter(fields, prompt).encode())
        return self.load(path)

    def remove(self, task_id: str) -> None:
        if not ID_PATTERN.match(task_id):  # no task can have this id
            raise HeartbeatTaskNotFound(task_id, _id_problem(task_id))
        try:
            self._path(task_id).unlink()
        except FileNotFoundError:
            raise HeartbeatTaskNotFound(task_id) from None

    def read_state(self) -> dict[str, Any]:
        """A dict: the file is read as it is on disk ({} if unreadable), and the scheduler
        checks each value it takes from it."""
        try:
            value = json.loads((self.root / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def write_state(self, state: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.root / STATE_FILE, state)
