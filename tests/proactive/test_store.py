"""Proactive agents on disk: atomic files, manifest recovery, invalid agents, pruning."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from claybot.proactive.models import AgentConfig, AgentState, ExecutionResult
from claybot.proactive.store import ProactiveStore, execution_stamp
from tests.proactive.conftest import HarnessFactory
from tests.proactive.test_service import body


def config(agent_id: str) -> AgentConfig:
    return AgentConfig(
        id=agent_id, name=agent_id, objective="o", schedule="* * * * *", cwd="/tmp",
        timeoutMs=1000, maxRetries=3, createdAt=1, updatedAt=1,
    )  # fmt: skip


def make_store(tmp_path: Path, ids: list[str]) -> ProactiveStore:
    store = ProactiveStore(tmp_path / "proactive")
    created: list[str] = []
    for agent_id in ids:
        created.append(agent_id)
        store.create(config(agent_id), AgentState(), list(created))
    return store


def loaded_ids(store: ProactiveStore) -> list[str]:
    return [a.config.id for a in store.load().agents]


def test_the_manifest_lists_agents_and_the_backup_is_one_write_behind(tmp_path: Path) -> None:
    store = make_store(tmp_path, ["aaaa0001", "aaaa0002"])
    assert json.loads(store.manifest.read_text()) == {
        "version": 1, "agents": ["aaaa0001", "aaaa0002"],
    }  # fmt: skip
    assert json.loads(store.backup.read_text())["agents"] == ["aaaa0001"]
    assert store.manifest.stat().st_mode & 0o777 == 0o600
    assert (store.root / "aaaa0001").stat().st_mode & 0o777 == 0o700
    assert not list(store.root.rglob("*.tmp"))
    report = store.load()
    assert report.manifest_source == "manifest" and report.skipped == []


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"version": 2, "agents": []}', b"[1]"])
def test_a_damaged_manifest_is_recovered_from_the_backup_and_the_folders(
    tmp_path: Path, damage: bytes
) -> None:
    store = make_store(tmp_path, ["aaaa0001", "aaaa0002"])
    store.manifest.write_bytes(damage)
    report = store.load()
    assert report.manifest_source == "backup"
    # The backup predates agent 2; its folder is found by the scan, not lost.
    assert [a.config.id for a in report.agents] == ["aaaa0001", "aaaa0002"]
    assert json.loads(store.manifest.read_text())["agents"] == ["aaaa0001", "aaaa0002"]
    assert loaded_ids(store) == ["aaaa0001", "aaaa0002"]


def test_without_manifest_or_backup_the_folders_are_scanned(tmp_path: Path) -> None:
    store = make_store(tmp_path, ["aaaa0001", "aaaa0002", "aaaa0003"])
    store.manifest.write_text("garbage")
    store.backup.unlink()
    (store.root / ".deleted-aaaa0009-1").mkdir()  # a delete in progress is not an agent
    (store.root / "no-config").mkdir()
    report = store.load()
    assert report.manifest_source == "scan"
    assert [a.config.id for a in report.agents] == ["aaaa0001", "aaaa0002", "aaaa0003"]
    assert store.load().manifest_source == "manifest"


def test_an_invalid_agent_is_skipped_with_a_warning_and_the_others_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store(tmp_path, ["aaaa0001", "aaaa0002", "aaaa0003"])
    (store.root / "aaaa0002" / "config.json").write_text('{"id": "aaaa0002", "name": 5}')
    (store.root / "aaaa0003" / "state.json").write_text('{"status": "exploded"}')
    with caplog.at_level(logging.WARNING):
        report = store.load()
    assert [a.config.id for a in report.agents] == ["aaaa0001"]
    assert [s.split(":")[0] for s in report.skipped] == ["aaaa0002", "aaaa0003"]
    assert "fix or remove" in caplog.text
    assert (store.root / "aaaa0002").exists(), "left on disk for the owner"


def test_executions_are_pruned_to_the_newest_hundred(tmp_path: Path) -> None:
    store = make_store(tmp_path, ["aaaa0001"])
    for n in range(105):
        files = store.execution_files("aaaa0001", 1_700_000_000_000 + n * 1000)
        files.jsonl.write_text("{}\n")
        files.log.write_text("x\n")
        store.write_result(
            files,
            ExecutionResult(
                executionId=f"e{n}", agentId="aaaa0001", startedAt=files.started_at_ms,
                completedAt=files.started_at_ms, durationMs=0, result="success", exitCode=0,
                outputLines=1,
            ),
        )  # fmt: skip
    assert store.prune("aaaa0001") == 5
    names = list((store.root / "aaaa0001" / "executions").iterdir())
    assert len(names) == 300
    results = store.results("aaaa0001", 1000)
    assert [r.executionId for r in results[:2]] == ["e104", "e103"]
    assert results[-1].executionId == "e5"


def test_a_run_cut_off_by_a_crash_gets_a_result_at_load(tmp_path: Path) -> None:
    store = make_store(tmp_path, ["aaaa0001"])
    files = store.execution_files("aaaa0001", 1_700_000_000_123)
    files.jsonl.write_text('{"type": "system"}\n')
    report = store.load()
    [closed] = report.interrupted
    assert closed.startedAt == 1_700_000_000_123 and closed.result == "failure"
    assert closed.error is not None and "interrupted" in closed.error
    assert files.result.exists()


def test_execution_stamps_are_the_iso_time_with_dashes() -> None:
    assert execution_stamp(1_771_065_000_007) == "2026-02-14T10-30-00-007Z"


async def test_a_restarted_service_recovers_agents_from_a_damaged_manifest(
    harness_factory: HarnessFactory,
) -> None:
    h = await harness_factory()
    ids = [(await h.service.create(body(f"task {n}")))["id"] for n in range(3)]
    await h.service.stop()
    manifest = h.root / "proactive" / "manifest.json"
    manifest.write_text('{"version": 1, "agents": [')  # torn write
    h2 = await h.restart()
    try:
        assert sorted(s["id"] for s in h2.service.summaries()) == sorted(ids)
        assert json.loads(manifest.read_text())["agents"] == ids
    finally:
        await h2.service.stop()
