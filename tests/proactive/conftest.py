"""Fixtures: the fake ``claude`` on PATH, its run records, a service on a fake clock."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from claybot.proactive.environment import run_environment
from claybot.proactive.runner import ClaudeRunner, Runner
from claybot.proactive.service import ProactiveService, ServiceLimits
from claybot.proactive.store import ProactiveStore
from tests.cron.fake_clock import FakeClock

FAKE_SOURCE = Path(__file__).with_name("fake_claude.py")
START = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


@dataclass
class FakeClaude:
    bin_dir: Path
    records: Path

    @property
    def path(self) -> str:
        return f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"

    def runs(self) -> list[dict[str, Any]]:
        found = []
        for record in sorted(self.records.glob("*.json")):
            data = json.loads(record.read_text())
            end = record.with_suffix(".end")
            data["end"] = float(end.read_text()) if end.exists() else None
            found.append(data)
        return sorted(found, key=lambda r: r["start"])

    def hanging_pids(self) -> list[int]:
        return [int(p.stem) for p in self.records.glob("*.hanging")]


def install_fake_claude(root: Path) -> FakeClaude:
    bin_dir = root / "bin"
    records = root / "records"
    bin_dir.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    source = FAKE_SOURCE.read_text().replace(
        'RECORD_DIR = Path(os.environ.get("FAKE_CLAUDE_RECORDS", "/tmp/fake-claude-records"))',
        f"RECORD_DIR = Path({str(records)!r})",
    )
    script = bin_dir / "claude"
    script.write_text(f"#!{sys.executable}\n{source}")
    script.chmod(0o755)
    return FakeClaude(bin_dir, records)


@pytest.fixture
def fake_claude(tmp_path: Path) -> FakeClaude:
    return install_fake_claude(tmp_path / "fake-claude")


def process_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (a zombie waiting for init counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return "State:\tZ" in status


async def eventually(
    check: Callable[[], bool], timeout_s: float = 10.0, message: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.02)


@dataclass
class Harness:
    """A service on a fake clock, with every published message recorded."""

    service: ProactiveService
    clock: FakeClock
    workspace: Path
    messages: list[dict[str, Any]]
    root: Path

    def of_type(self, type: str) -> list[dict[str, Any]]:
        return [m["data"] for m in self.messages if m["type"] == type]

    async def restart(self, **overrides: Any) -> Harness:
        await self.service.stop()
        return await make_harness(self.root, self.clock, **overrides)


async def make_harness(
    root: Path,
    clock: FakeClock,
    *,
    runners: dict[str, Runner] | None = None,
    env: dict[str, str] | None = None,
    limits: ServiceLimits | None = None,
    kill_grace_s: float = 5.0,
) -> Harness:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    environment = env if env is not None else {"PATH": os.environ["PATH"], "HOME": str(root)}

    async def claude_env() -> dict[str, str]:
        return run_environment(environment)

    messages: list[dict[str, Any]] = []
    service = ProactiveService(
        ProactiveStore(root / "proactive"),
        runners or {"claude": ClaudeRunner(claude_env, kill_grace_s=kill_grace_s)},
        workspace=workspace,
        limits=limits or ServiceLimits(),
        clock=clock,
    )
    original = service.broadcaster.publish

    def publish(type: str, data: dict[str, Any]) -> None:
        messages.append({"type": type, "data": data})  # synchronous: no race with a reader
        original(type, data)

    service.broadcaster.publish = publish  # type: ignore[method-assign]
    await service.start()
    return Harness(service, clock, workspace, messages, root)


HarnessFactory = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def harness_factory(tmp_path: Path) -> AsyncIterator[HarnessFactory]:
    made: list[Harness] = []
    clock = FakeClock(START)

    async def factory(**kwargs: Any) -> Harness:
        harness = await make_harness(tmp_path / "svc", clock, **kwargs)
        made.append(harness)
        return harness

    yield factory
    for harness in made:
        await harness.service.stop()
