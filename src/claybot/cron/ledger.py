"""The run ledger: which (task, scheduled time) runs started, finished or were skipped.

``cron/.runs.jsonl`` is append-only and group-committed: a run is durably
recorded as started *before* its prompt is posted, so a restart can tell a run
that happened from one that did not, and re-posting a started run reuses its
message id (the agent's inbox drops a repeat). When many tasks fire in the same
second, their records share one fsync. The file is compacted to one line per
task once it grows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from claybot.durable.atomic import atomic_write_bytes
from claybot.durable.group_commit import GroupCommitWriter
from claybot.durable.jsonl import encode_record, parse_line, read_jsonl, read_lines_backward

LEDGER_FILE = ".runs.jsonl"  # in <home>/cron, beside the task folders
COMPACT_AFTER = 50_000  # records appended since the last compaction
Status = Literal["ran", "failed", "skipped"]
Run = dict[str, Any]  # at, status, and startedAt / finishedAt / reason as known
HISTORY_SCAN = 200_000  # lines a task's run history looks back through at most


@dataclass
class TaskRuns:
    last_at: int | None = None  # the newest scheduled instant decided (ran or skipped), ms
    running: set[int] = field(default_factory=set)  # started, not finished
    last_finished: dict[str, Any] | None = None
    skipped: int = 0


class RunLedger:
    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self._writer = GroupCommitWriter(durable=durable)
        self.tasks: dict[str, TaskRuns] = {}
        self._appended = 0
        self._compacting = False

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        records = await asyncio.to_thread(lambda: read_jsonl(self.path, repair=True).records)
        for record in records:
            self._fold(record)
        self._appended = len(records)
        await self._writer.start()

    def read(self) -> None:
        """Fold what the file holds without opening it for writing: for a reader while
        no engine runs (the CLI's listing), which must not repair the engine's file."""
        for record in read_jsonl(self.path, repair=False).records:
            self._fold(record)

    async def close(self) -> None:
        await self._writer.close()

    def runs(self, task_id: str) -> TaskRuns:
        return self.tasks.setdefault(task_id, TaskRuns())

    def history(self, task_id: str, limit: int, scan_lines: int = HISTORY_SCAN) -> list[Run]:
        """A task's newest ``limit`` runs (ran, failed, skipped, or started and still
        going), newest first, read from the end of the file: what it holds since its
        last compaction (which keeps each task's last run only), looking at no more than
        ``scan_lines`` lines. Blocking: call it off the event loop."""
        runs: dict[int, Run] = {}
        for number, line in enumerate(read_lines_backward(self.path)):
            if number >= scan_lines:
                break
            record = parse_line(line)
            if record is None or record.get("task") != task_id:
                continue
            op, at = record.get("op"), record.get("at")
            if op == "deleted":
                break  # what is older belonged to an earlier task of the same id
            if op == "state":  # the compaction: it kept the last finished run only
                finished = record.get("lastFinished")
                if isinstance(finished, dict) and isinstance(finished.get("at"), int):
                    runs.setdefault(finished["at"], dict(finished))
                break
            if op == "seen" or not isinstance(at, int):
                continue  # a mark that nothing before it is owed, not a run
            if at not in runs:
                if len(runs) >= limit:
                    break
                runs[at] = {"at": at, "status": "running"}
            run = runs[at]
            if op == "finished":
                run.update(status=record.get("status"), finishedAt=record.get("finishedAt"))
            elif op == "started":
                run["startedAt"] = record.get("t")
            elif op == "skipped":
                run.update(status="skipped", reason=record.get("reason"))
        return sorted(runs.values(), key=lambda run: run["at"], reverse=True)

    def _fold(self, record: Mapping[str, Any]) -> None:
        try:
            op, task_id = record["op"], str(record["task"])
        except (KeyError, TypeError):
            return
        runs = self.runs(task_id)
        if op == "deleted":
            self.tasks.pop(task_id, None)
            return
        if op == "state":  # a compacted task
            runs.last_at = record.get("lastAt")
            runs.running = set(record.get("running") or [])
            runs.last_finished = record.get("lastFinished")
            runs.skipped = int(record.get("skipped") or 0)
            return
        at = int(record["at"])
        if runs.last_at is None or at > runs.last_at:
            runs.last_at = at
        if op == "seen":
            return
        if op == "started":
            runs.running.add(at)
        elif op == "finished":
            runs.running.discard(at)
            runs.last_finished = {
                "at": at,
                "status": record.get("status"),
                "finishedAt": record.get("finishedAt"),
            }
        elif op == "skipped":
            runs.skipped += 1

    async def _append(self, records: Sequence[Mapping[str, Any]]) -> None:
        data = b"".join(encode_record(record) for record in records)
        await self._writer.append(self.path, data)
        # Only what is on disk counts: a record the disk refused changes nothing.
        for record in records:
            self._fold(record)
        self._appended += 1
        if self._appended > COMPACT_AFTER and not self._compacting:
            await self.compact()

    async def seen(self, task_ids: list[str], at_ms: int) -> None:
        """Nothing before ``at_ms`` is owed to these tasks (new, or just re-enabled)."""
        await self._append([{"op": "seen", "task": task_id, "at": at_ms} for task_id in task_ids])

    async def started(self, task_id: str, at_ms: int, now_ms: int) -> None:
        await self._append([started_record(task_id, at_ms, now_ms)])

    async def record(self, records: Sequence[StartedRecord | SkippedRecord]) -> None:
        """Several records in one append (one sync): runs that fire together."""
        if records:
            await self._append(records)

    async def finished(self, task_id: str, at_ms: int, status: Status, now_ms: int) -> None:
        record = {"op": "finished", "task": task_id, "at": at_ms, "status": status}
        await self._append([{**record, "finishedAt": now_ms}])

    async def skipped(self, task_id: str, at_ms: list[int], reason: str) -> None:
        await self.record(skipped_records(task_id, at_ms, reason))

    async def deleted(self, task_id: str) -> None:
        await self._append([{"op": "deleted", "task": task_id}])

    async def compact(self) -> None:
        """Rewrite the ledger as one ``state`` line per task (atomically)."""
        self._compacting = True
        try:
            lines = b"".join(
                encode_record(
                    {
                        "op": "state",
                        "task": task_id,
                        "lastAt": runs.last_at,
                        "running": sorted(runs.running),
                        "lastFinished": runs.last_finished,
                        "skipped": runs.skipped,
                    }
                )
                for task_id, runs in self.tasks.items()
            )
            await self._writer.run_exclusive(
                lambda: atomic_write_bytes(self.path, lines, mode=0o600), close=[self.path]
            )
            self._appended = len(self.tasks)
        finally:
            self._compacting = False


class StartedRecord(TypedDict):
    """A run began (``t``: when; ``at``: the instant it is for). A ledger line, in the
    order its keys are written."""

    op: Literal["started"]
    task: str
    at: int
    t: int


class SkippedRecord(TypedDict):
    op: Literal["skipped"]
    task: str
    at: int
    reason: str


def started_record(task_id: str, at_ms: int, now_ms: int) -> StartedRecord:
    return {"op": "started", "task": task_id, "at": at_ms, "t": now_ms}


def skipped_records(task_id: str, at_ms: list[int], reason: str) -> list[SkippedRecord]:
    return [{"op": "skipped", "task": task_id, "at": at, "reason": reason} for at in at_ms]
