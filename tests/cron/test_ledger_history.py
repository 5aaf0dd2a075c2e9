"""A task's run history, read from the end of the run ledger."""

from __future__ import annotations

from pathlib import Path

from claybot.cron.ledger import RunLedger


async def ledger_at(path: Path) -> RunLedger:
    ledger = RunLedger(path, durable=False)
    await ledger.open()
    return ledger


async def test_runs_newest_first_with_their_outcome(tmp_path: Path) -> None:
    ledger = await ledger_at(tmp_path / ".runs.jsonl")
    await ledger.seen(["a", "b"], 0)
    await ledger.started("a", 1000, 1001)
    await ledger.started("b", 1000, 1001)
    await ledger.finished("a", 1000, "ran", 1500)
    await ledger.skipped("a", [2000, 3000], "overlap")
    await ledger.started("a", 4000, 4002)  # still running
    await ledger.finished("b", 1000, "failed", 1600)
    history = ledger.history("a", 10)
    assert history == [
        {"at": 4000, "status": "running", "startedAt": 4002},
        {"at": 3000, "status": "skipped", "reason": "overlap"},
        {"at": 2000, "status": "skipped", "reason": "overlap"},
        {"at": 1000, "status": "ran", "startedAt": 1001, "finishedAt": 1500},
    ]
    assert ledger.history("a", 2) == history[:2]
    assert ledger.history("b", 10) == [
        {"at": 1000, "status": "failed", "startedAt": 1001, "finishedAt": 1600}
    ]
    assert ledger.history("nobody", 10) == []
    await ledger.close()


async def test_a_compaction_keeps_the_last_run_and_a_deletion_ends_the_history(
    tmp_path: Path,
) -> None:
    ledger = await ledger_at(tmp_path / ".runs.jsonl")
    for at in (1000, 2000):
        await ledger.started("a", at, at + 1)
        await ledger.finished("a", at, "ran", at + 5)
    await ledger.compact()
    await ledger.started("a", 3000, 3001)
    await ledger.finished("a", 3000, "ran", 3005)
    assert [run["at"] for run in ledger.history("a", 10)] == [3000, 2000]

    await ledger.deleted("a")
    await ledger.started("a", 5000, 5001)  # a new task that took the same id
    assert [run["at"] for run in ledger.history("a", 10)] == [5000]
    await ledger.close()
