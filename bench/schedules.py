"""Benchmark the cron scheduler with 10,000 tasks.

Prints one table:
- boot: engine start with 10,000 TASK.md files (scan, parse, plan);
- idle CPU: the engine's CPU time over a window in which no task is due, as a
  percentage of one core;
- lateness when 1,000 tasks fire in the same minute, p50/p99/max, at two points:
  "fired" is when the run is durably recorded as started in the run ledger (the
  scheduler's decision: from then on it happens exactly once); "queued" is when
  its prompt is durably in the agent's inbox. The first minute includes creating
  the 1,000 cron agents; in the second they exist but may have been unloaded
  after a minute idle (the default), so they are read back from disk.

The other 9,000 tasks are due once a year. Durability stays on; the scripted
``echo`` model answers; the event loop and the heap are set up as ``claybot
start`` does. Real wall clock: the run waits for two minute boundaries, so it
takes about two to three minutes. Not part of the test suite: run it with
``make bench`` or ``.venv/bin/python bench/schedules.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from claybot.config.home import HomePaths
from claybot.cron.run import RunKey
from claybot.engine.engine import Engine, EngineOptions
from claybot.server.serve import event_loop_runner, freeze_boot_heap

SETTINGS = {
    "providers": [{"id": "scripted", "model": "echo"}],
    "agents": {"maxConcurrent": 1024},
    "heartbeat": {"enabled": False},
}
TARGET_P99_MS = 100.0
TARGET_IDLE_CPU = 1.0  # percent of one core


def two_minutes(first: datetime) -> str:
    """A schedule matching ``first`` and the minute after it (UTC), and nothing near."""
    second = first + timedelta(minutes=1)
    minutes = ",".join(sorted({str(first.minute), str(second.minute)}, key=int))
    hours = ",".join(sorted({str(first.hour), str(second.hour)}, key=int))
    return f"{minutes} {hours} * * *"


def write_tasks(home: Path, total: int, firing: int, first: datetime) -> None:
    root = home / "cron"
    for number in range(total):
        schedule = two_minutes(first) if number < firing else "0 3 1 1 *"
        folder = root / f"task-{number:05d}"
        (folder / "files").mkdir(parents=True)
        (folder / "TASK.md").write_text(
            f"---\ntaskId: t{number:05d}\nname: task {number}\nschedule: '{schedule}'\n"
            f"---\n\nSay hello ({number}).\n"
        )


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def wait_for_count(latencies: list[float], count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(latencies) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def run(total: int, firing: int, idle_window_s: float) -> list[tuple[str, str]]:
    home = Path(tempfile.mkdtemp(prefix="cb-bench-cron-"))
    try:
        paths = HomePaths(home)
        paths.ensure()
        paths.settings.write_text(json.dumps(SETTINGS))
        # Far enough ahead for writing the files, booting and the idle window.
        ahead = datetime.now(UTC) + timedelta(seconds=idle_window_s + 45)
        first = ahead.replace(second=0, microsecond=0) + timedelta(minutes=1)
        write_tasks(home, total, firing, first)
        engine = Engine(paths, EngineOptions(port=0, watch_files=True))
        started = time.perf_counter()
        await engine.start()
        freeze_boot_heap()  # as `claybot start` does
        boot_ms = (time.perf_counter() - started) * 1000
        assert len(engine.cron.tasks) == total, engine.cron.problems[:3]
        latencies: dict[str, list[float]] = {"recorded": [], "posted": []}

        def record(stage: str, key: RunKey, lateness_s: float) -> None:
            latencies[stage].append(lateness_s * 1000)

        engine.cron.on_lateness = record
        await asyncio.sleep(2)  # boot leftovers (the database opening, first writes)
        cpu_before, wall_before = cpu_seconds(), time.perf_counter()
        await asyncio.sleep(idle_window_s)
        idle_cpu = (cpu_seconds() - cpu_before) / (time.perf_counter() - wall_before) * 100
        assert datetime.now(UTC) < first, "the idle window ran into the first firing minute"
        rows = [
            ("tasks", f"{total:,} ({firing:,} firing each minute, the rest yearly)"),
            ("boot with all tasks", f"{boot_ms:,.0f} ms"),
            (f"idle CPU over {idle_window_s:.0f} s", f"{idle_cpu:.2f} % of a core"),
        ]
        for label in ("minute 1 (agents created)", "minute 2"):
            await wait_for_count(latencies["posted"], firing, timeout_s=150)
            for stage, name in (("recorded", "fired"), ("posted", "queued")):
                minute, latencies[stage] = latencies[stage], []
                rows.append(
                    (
                        f"lateness {name}, {label}",
                        f"p50 {statistics.median(minute):.1f} ms, "
                        f"p99 {percentile(minute, 0.99):.1f} ms, "
                        f"max {max(minute):.1f} ms ({len(minute):,} runs)",
                    )
                )
        await engine.stop()
        return rows
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--firing", type=int, default=1_000)
    parser.add_argument("--idle-window", type=float, default=20.0, help="seconds")
    args = parser.parse_args()
    with event_loop_runner() as runner:  # the engine's loop (uvloop when installed)
        rows = runner.run(run(args.tasks, args.firing, args.idle_window))
    width = max(len(label) for label, _ in rows)
    print(f"{'measure'.ljust(width)} | result")
    print(f"{'-' * width}-|-{'-' * 40}")
    for label, value in rows:
        print(f"{label.ljust(width)} | {value}")
    print(f"targets: p99 lateness < {TARGET_P99_MS:.0f} ms, idle CPU < {TARGET_IDLE_CPU:.0f} %")


if __name__ == "__main__":
    main()
