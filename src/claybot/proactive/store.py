"""Proactive agents on disk: ``<home>/proactive/`` (seed 004's layout).

```
manifest.json           {"version": 1, "agents": [ids]}
manifest.json.backup    the previous manifest
<id>/config.json        AgentConfig
<id>/state.json         AgentState
<id>/executions/<ts>.jsonl | .log | .result.json
```

Every JSON file is written atomically. A damaged manifest is replaced by its
backup, or by a scan of the agent folders; an agent whose files do not validate
is skipped with a warning and left on disk for the owner to fix. Blocking calls:
the service runs them in a thread.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from claybot.durable.atomic import atomic_write_bytes, atomic_write_json, fsync_directory
from claybot.proactive.models import AGENT_ID_RE, AgentConfig, AgentState, ExecutionResult

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
MAX_EXECUTION_HISTORY = 100
FILE_MODE = 0o600
DIR_MODE = 0o700
RESULT_SUFFIX = ".result.json"


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class StoredAgent:
    config: AgentConfig
    state: AgentState


@dataclass(frozen=True)
class ExecutionFiles:
    stamp: str
    started_at_ms: int
    jsonl: Path
    log: Path
    result: Path


@dataclass(frozen=True)
class LoadReport:
    agents: list[StoredAgent]
    manifest_source: str  # "manifest", "backup", "scan" or "empty"
    skipped: list[str]  # "<id>: reason"
    interrupted: list[ExecutionResult]  # runs cut off by a crash, closed at load


def execution_stamp(started_at_ms: int) -> str:
    """``2026-02-14T10-30-00-000Z``: the ISO time with ``:`` and ``.`` replaced (seed 004)."""
    moment = datetime.fromtimestamp(started_at_ms / 1000, UTC)
    iso = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return iso.replace(":", "-").replace(".", "-")


def parse_manifest(data: bytes) -> list[str]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ManifestError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict) or value.get("version") != MANIFEST_VERSION:
        raise ManifestError("not a version 1 manifest")
    agents = value.get("agents")
    if not isinstance(agents, list) or not all(
        isinstance(a, str) and AGENT_ID_RE.match(a) for a in agents
    ):
        raise ManifestError("'agents' must be a list of agent ids")
    return list(dict.fromkeys(agents))


class ProactiveStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def backup(self) -> Path:
        return self.root / "manifest.json.backup"

    def agent_dir(self, agent_id: str) -> Path:
        if not AGENT_ID_RE.match(agent_id):
            raise ValueError(f"invalid agent id {agent_id!r}")
        return self.root / agent_id

    def executions_dir(self, agent_id: str) -> Path:
        return self.agent_dir(agent_id) / "executions"

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, DIR_MODE)

    # -- manifest -------------------------------------------------------------

    def write_manifest(self, agent_ids: list[str]) -> None:
        """The current manifest becomes the backup, then the new one replaces it."""
        self.ensure()
        if self.manifest.exists():
            try:
                parse_manifest(self.manifest.read_bytes())
            except (ManifestError, OSError):
                pass  # a damaged manifest must not overwrite a good backup
            else:
                atomic_write_bytes(self.backup, self.manifest.read_bytes(), mode=FILE_MODE)
        atomic_write_json(
            self.manifest, {"version": MANIFEST_VERSION, "agents": agent_ids}, mode=FILE_MODE
        )

    def _read_ids(self) -> tuple[list[str], str]:
        """The manifest's ids; else the backup's plus agent folders it does not list; else a scan.

        The backup is one write behind, so an agent created by that last write is
        found by the scan rather than lost.
        """
        if self.manifest.exists():
            try:
                return parse_manifest(self.manifest.read_bytes()), "manifest"
            except (ManifestError, OSError) as exc:
                self._damaged(self.manifest, exc)
        if self.backup.exists():
            try:
                ids = parse_manifest(self.backup.read_bytes())
            except (ManifestError, OSError) as exc:
                self._damaged(self.backup, exc)
            else:
                return ids + [i for i in self._scan() if i not in ids], "backup"
        if not self.root.exists():
            return [], "empty"
        found = self._scan()
        return found, "scan" if found or self.manifest.exists() else "empty"

    def _damaged(self, path: Path, exc: Exception) -> None:
        log.warning(
            "proactive %s is damaged (%s); trying the next source",
            path.name,
            exc,
            extra={"action": "proactive.manifest_damaged", "path": str(path)},
        )

    def _scan(self) -> list[str]:
        return sorted(
            entry.name
            for entry in self.root.iterdir()
            if entry.is_dir()
            and not entry.name.startswith(".")
            and AGENT_ID_RE.match(entry.name)
            and (entry / "config.json").is_file()
        )

    # -- agents ---------------------------------------------------------------

    def load(self) -> LoadReport:
        ids, source = self._read_ids()
        agents: list[StoredAgent] = []
        skipped: list[str] = []
        interrupted: list[ExecutionResult] = []
        for agent_id in ids:
            try:
                stored = self._read_agent(agent_id)
            except (OSError, ValueError, ValidationError) as exc:
                reason = str(exc).splitlines()[0]
                skipped.append(f"{agent_id}: {reason}")
                log.warning(
                    "proactive agent %s skipped: %s; fix or remove %s",
                    agent_id,
                    reason,
                    self.root / agent_id,
                    extra={"action": "proactive.agent_invalid", "agentId": agent_id},
                )
                continue
            agents.append(stored)
            interrupted.extend(self._close_interrupted(agent_id))
        if source in ("backup", "scan"):
            self.write_manifest([a.config.id for a in agents])
            log.warning(
                "proactive manifest rebuilt from the %s with %d agents",
                source,
                len(agents),
                extra={"action": "proactive.manifest_recovered", "source": source},
            )
        return LoadReport(agents, source, skipped, interrupted)

    def peek(self) -> list[AgentConfig]:
        """The valid agents ``load`` would find, read without repairing or closing anything
        (for ``claybot doctor``, which may run beside the engine that owns these files)."""
        configs = []
        for agent_id in self._read_ids()[0]:
            try:
                configs.append(self._read_agent(agent_id).config)
            except (OSError, ValueError, ValidationError):
                continue  # ``load`` reports it (and the engine logs it)
        return configs

    def _read_agent(self, agent_id: str) -> StoredAgent:
        folder = self.agent_dir(agent_id)
        config = AgentConfig.model_validate_json((folder / "config.json").read_bytes())
        if config.id != agent_id:
            raise ValueError(f"config.json has id {config.id!r}, its folder is {agent_id!r}")
        state_path = folder / "state.json"
        state = (
            AgentState.model_validate_json(state_path.read_bytes())
            if state_path.exists()
            else AgentState()
        )
        return StoredAgent(config, state)

    def write_config(self, config: AgentConfig) -> None:
        folder = self.agent_dir(config.id)
        self._mkdir(folder)
        atomic_write_json(folder / "config.json", _dump(config), mode=FILE_MODE)

    def write_state(self, agent_id: str, state: AgentState) -> None:
        folder = self.agent_dir(agent_id)
        self._mkdir(folder)
        atomic_write_json(folder / "state.json", _dump(state), mode=FILE_MODE)

    def create(self, config: AgentConfig, state: AgentState, agent_ids: list[str]) -> None:
        """Files first, manifest last: a crash in between leaves a folder a scan finds."""
        self.ensure()
        self.write_config(config)
        self.write_state(config.id, state)
        self._mkdir(self.executions_dir(config.id))
        self.write_manifest(agent_ids)

    def delete(self, agent_id: str, agent_ids: list[str]) -> None:
        """Manifest first, files last: a crash in between leaves an orphan, never a ghost."""
        self.write_manifest(agent_ids)
        folder = self.agent_dir(agent_id)
        if folder.exists():
            # Renamed away first, so a half-removed folder is never read as an agent.
            trash = self.root / f".deleted-{agent_id}-{os.getpid()}"
            os.replace(folder, trash)
            fsync_directory(self.root)
            shutil.rmtree(trash, ignore_errors=True)

    def _mkdir(self, folder: Path) -> None:
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            fsync_directory(folder.parent)

    # -- executions -------------------------------------------------------------

    def execution_files(self, agent_id: str, started_at_ms: int) -> ExecutionFiles:
        """Fresh file names for a run starting then (a taken stamp moves on by 1 ms)."""
        folder = self.executions_dir(agent_id)
        self._mkdir(folder)
        while True:
            stamp = execution_stamp(started_at_ms)
            if not any((folder / f"{stamp}{s}").exists() for s in (".jsonl", RESULT_SUFFIX)):
                break
            started_at_ms += 1
        return ExecutionFiles(
            stamp,
            started_at_ms,
            folder / f"{stamp}.jsonl",
            folder / f"{stamp}.log",
            folder / f"{stamp}{RESULT_SUFFIX}",
        )

    def write_result(self, files: ExecutionFiles, result: ExecutionResult) -> None:
        atomic_write_json(files.result, result.to_wire(), mode=FILE_MODE)
        for path in (files.jsonl, files.log):
            if path.exists():
                os.chmod(path, FILE_MODE)

    def results(self, agent_id: str, limit: int) -> list[ExecutionResult]:
        """Newest first; an unreadable result file is skipped."""
        folder = self.executions_dir(agent_id)
        if not folder.exists():
            return []
        names = sorted(
            (p.name for p in folder.iterdir() if p.name.endswith(RESULT_SUFFIX)), reverse=True
        )
        found: list[ExecutionResult] = []
        for name in names:
            if len(found) >= limit:
                break
            try:
                found.append(ExecutionResult.model_validate_json((folder / name).read_bytes()))
            except (OSError, ValueError):
                log.warning(
                    "unreadable execution result %s", folder / name,
                    extra={"action": "proactive.result_invalid", "agentId": agent_id},
                )  # fmt: skip
        return found

    def log_path(self, agent_id: str, stamp: str | None = None) -> Path | None:
        """The ``.log`` of the newest execution, or of the one whose stamp starts with ``stamp``."""
        folder = self.executions_dir(agent_id)
        if not folder.exists():
            return None
        logs = sorted((p for p in folder.iterdir() if p.suffix == ".log"), reverse=True)
        if stamp is not None:
            logs = [p for p in logs if p.name.startswith(stamp)]
        return logs[0] if logs else None

    def prune(self, agent_id: str, keep: int = MAX_EXECUTION_HISTORY) -> int:
        """Keep the ``keep`` newest executions (by result file name); returns how many went."""
        folder = self.executions_dir(agent_id)
        if not folder.exists():
            return 0
        stamps = sorted(
            (
                p.name[: -len(RESULT_SUFFIX)]
                for p in folder.iterdir()
                if p.name.endswith(RESULT_SUFFIX)
            ),
            reverse=True,
        )
        removed = 0
        for stamp in stamps[keep:]:
            for suffix in (".jsonl", ".log", RESULT_SUFFIX):
                (folder / f"{stamp}{suffix}").unlink(missing_ok=True)
            removed += 1
        return removed

    def _close_interrupted(self, agent_id: str) -> list[ExecutionResult]:
        """A run the engine did not finish (killed, crashed) gets a result saying so."""
        folder = self.executions_dir(agent_id)
        if not folder.exists():
            return []
        closed: list[ExecutionResult] = []
        for path in sorted(folder.glob("*.jsonl")):
            stamp = path.name[: -len(".jsonl")]
            result_path = folder / f"{stamp}{RESULT_SUFFIX}"
            if result_path.exists():
                continue
            started = _stamp_ms(stamp)
            if started is None:
                continue
            ended = int(path.stat().st_mtime * 1000)
            result = ExecutionResult(
                executionId=f"interrupted-{stamp}",
                agentId=agent_id,
                startedAt=started,
                completedAt=max(ended, started),
                durationMs=max(ended - started, 0),
                result="failure",
                exitCode=None,
                outputLines=0,
                error="interrupted: the engine stopped during this run",
            )
            atomic_write_json(result_path, result.to_wire(), mode=FILE_MODE)
            closed.append(result)
        return closed


def _stamp_ms(stamp: str) -> int | None:
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%dT%H-%M-%S-%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


def _dump(model: AgentConfig | AgentState) -> dict[str, Any]:
    return model.model_dump(mode="json")
