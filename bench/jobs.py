"""Benchmark jobs (seed 002): throughput and claim latency, against Procrastinate.

Each job is a whole agent loop: the scripted provider answers at once with one tool
call (``write_file``, which stores an artifact and logs a line), then with
``final_answer``; every step is checkpointed, fenced by the claim and logged, as in
production. Prints one table:

- jobs per second, create to completed: N jobs created at once (in batches, as
  clients would) while the workers run, timed until the last one completed;
- claim latency p50/p99 at light load: one job at a time, from its ``created_at``
  to its ``started_at`` (the time an idle worker takes to hear of it and claim it);

for SQLite with 1 and 4 in-engine workers; PostgreSQL with 1, 4 and 16 in-engine
workers (and 32, to show where one process tops out), and with 1, 2 and 4 ``claybot
worker`` processes (32 slots each; the engine then runs none and only creates the
jobs and hears them finish); and Procrastinate doing no-op jobs on the same
PostgreSQL server in the same run: one worker process with 1, 4, 16 and 32 at once,
and 2 and 4 processes of 4 and of 32, so that its best is in the table whatever it
is on the machine. Procrastinate comes with the ``bench`` extra: ``pip install -e
'.[bench]'``.

Durability stays on (SQLite WAL with synchronous=FULL, PostgreSQL's defaults).
Everything runs on uvloop, the loop of the engine and of ``claybot worker``
(Procrastinate's worker processes too).
Not part of the test suite: ``.venv/bin/python bench/jobs.py [--jobs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import HitlMode, NewJob
from claybot.kernel.event_loop import event_loop_runner

SERVER = os.environ.get("CLAYBOT_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


RULES = [
    {"match": "Task: bench", "response": call("write_file", filename="out.txt", content="ok")},
    {"match": "Wrote out.txt", "response": call("final_answer", answer="done")},
]
CREATE_BATCH = 50  # jobs created at once, as that many clients would
LATENCY_JOBS = 100
SLOTS_PER_PROCESS = 32  # `claybot worker --slots`: where two processes stop growing here


@dataclass
class Row:
    system: str
    database: str
    setup: str
    jobs: int
    seconds: float
    claim_ms: list[float]

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


# -- PostgreSQL databases made for the run ----------------------------------------------


async def _admin(sql: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(f"{SERVER}/postgres", timeout=5)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def new_database() -> str:
    name = f"claybot_bench_{secrets.token_hex(4)}"
    await _admin(f'CREATE DATABASE "{name}"')
    return name


async def drop_database(name: str) -> None:
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- ClayBot ------------------------------------------------------------------------------


def _settings(in_engine: int) -> dict[str, Any]:
    return {
        "providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}],
        "jobs": {"workers": in_engine, "maxIterations": 5},
    }


async def claybot_row(
    database: str, in_engine: int, processes: int, jobs: int, scratch: Path
) -> Row:
    home = scratch / f"home-{secrets.token_hex(3)}"
    home.mkdir()
    paths = HomePaths(home)
    paths.settings.write_text(json.dumps(_settings(in_engine)))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    pg_name = None
    if database == "PostgreSQL":
        pg_name = await new_database()
        env["CLAYBOT_DATABASE_URL"] = f"{SERVER}/{pg_name}"
    engine = Engine(paths, EngineOptions(port=None, env=env))
    await engine.start()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        db = await engine.jobs.database()
        if processes:
            workers = [spawn_worker(home, env, f"bench-{i}") for i in range(processes)]
            await _until_workers(db, processes)
        counter = _Completions(engine)
        await _run_jobs(db, counter, 20)  # warm up: imports, connections, caches
        started = time.perf_counter()
        await _run_jobs(db, counter, jobs)
        seconds = time.perf_counter() - started
        claim_ms = await _claim_latencies(db, counter)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
        await engine.stop(drain_timeout_s=5)
        if pg_name is not None:
            await drop_database(pg_name)
    setup = (
        f"{processes} `claybot worker` x {SLOTS_PER_PROCESS}"
        if processes
        else f"{in_engine} in-engine worker{'s' if in_engine > 1 else ''}"
    )
    return Row("ClayBot", database, setup, jobs, seconds, claim_ms)


def spawn_worker(home: Path, env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "claybot", "worker", "--quiet", "--id", name]
    return subprocess.Popen(
        [*command, "--slots", str(SLOTS_PER_PROCESS)],
        env={**os.environ, **env, "CLAYBOT_HOME": str(home)},
        stdout=subprocess.DEVNULL,
    )


class _Completions:
    """Counts ``job.status`` completed events (the engine relays other processes' too)."""

    def __init__(self, engine: Engine) -> None:
        self.done: set[str] = set()
        self.failed: set[str] = set()
        self._changed = asyncio.Event()
        engine.events.add_listener(self._heard)

    def _heard(self, event: Any) -> None:
        if event.type != "job.status":
            return
        status = event.payload.get("status")
        if status == "completed":
            self.done.add(event.payload["jobId"])
        elif status in ("failed", "cancelled"):
            self.failed.add(event.payload["jobId"])
        else:
            return
        self._changed.set()

    async def wait_for(self, ids: set[str]) -> None:
        async with asyncio.timeout(600):
            while not ids <= self.done:
                if ids & self.failed:
                    raise RuntimeError(f"{len(ids & self.failed)} benchmark jobs failed")
                self._changed.clear()
                await self._changed.wait()


async def _create(db: JobDatabase, count: int) -> set[str]:
    ids: set[str] = set()
    for start in range(0, count, CREATE_BATCH):
        batch = min(CREATE_BATCH, count - start)
        created = await asyncio.gather(
            *(
                db.jobs.create(NewJob("bench", hitl_mode=HitlMode.AUTO_EXECUTE))
                for _ in range(batch)
            )
        )
        ids.update(job.id for job in created)
    return ids


async def _run_jobs(db: JobDatabase, counter: _Completions, count: int) -> None:
    creating = asyncio.create_task(_create(db, count))
    ids = await creating
    await counter.wait_for(ids)


async def _claim_latencies(db: JobDatabase, counter: _Completions) -> list[float]:
    latencies = []
    for _ in range(LATENCY_JOBS):
        job = await db.jobs.create(NewJob("bench", hitl_mode=HitlMode.AUTO_EXECUTE))
        await counter.wait_for({job.id})
        done = await db.jobs.get(job.id)
        assert done.started_at is not None
        latencies.append((done.started_at - done.created_at).total_seconds() * 1000)
    return latencies


async def _until_workers(db: JobDatabase, count: int) -> None:
    async with asyncio.timeout(60):
        while len([w for w in await db.workers.listing() if w.status == "active"]) < count:
            await asyncio.sleep(0.1)


# -- Procrastinate ----------------------------------------------------------------------

PROCRASTINATE_WORKER = """
import logging, sys
import procrastinate, uvloop
logging.disable(logging.CRITICAL)
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=sys.argv[1]))

@app.task(name="noop")
async def noop():
    return None

async def main():
    async with app.open_async():
        await app.run_worker_async(concurrency=int(sys.argv[2]), install_signal_handlers=True)

uvloop.run(main())  # the loop ClayBot's engine and workers run on, for a like comparison
"""


def spawn_procrastinate(url: str, concurrency: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", PROCRASTINATE_WORKER, url, str(concurrency)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def procrastinate_row(processes: int, concurrency: int, jobs: int) -> Row:
    import procrastinate
    import psycopg

    name = await new_database()
    url = f"{SERVER}/{name}"
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    workers: list[subprocess.Popen[bytes]] = []
    try:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            workers = [spawn_procrastinate(url, concurrency) for _ in range(processes)]
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as watch:
                await _procrastinate_wait(noop, watch, 20)  # warm up
                started = time.perf_counter()
                await _procrastinate_wait(noop, watch, jobs)
                seconds = time.perf_counter() - started
                latencies = []
                for _ in range(LATENCY_JOBS):
                    await noop.defer_async()
                    await _procrastinate_done(watch, None)
                    row = await (
                        await watch.execute(
                            "SELECT min(at) FILTER (WHERE type = 'deferred'), "
                            "min(at) FILTER (WHERE type = 'started') FROM procrastinate_events "
                            "WHERE job_id = (SELECT max(id) FROM procrastinate_jobs)"
                        )
                    ).fetchone()
                    assert row is not None
                    latencies.append((row[1] - row[0]).total_seconds() * 1000)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
        await drop_database(name)
    setup = (
        f"{processes} processes x {concurrency}"
        if processes > 1
        else f"1 process, concurrency {concurrency}"
    )
    return Row("Procrastinate (no-op)", "PostgreSQL", setup, jobs, seconds, latencies)


async def _procrastinate_wait(task: Any, watch: Any, count: int) -> None:
    for start in range(0, count, CREATE_BATCH):
        batch = min(CREATE_BATCH, count - start)
        await asyncio.gather(*(task.defer_async() for _ in range(batch)))
    await _procrastinate_done(watch, count)


async def _procrastinate_done(watch: Any, _count: int | None) -> None:
    async with asyncio.timeout(600):
        while True:
            row = await (
                await watch.execute(
                    "SELECT count(*) FROM procrastinate_jobs WHERE status NOT IN "
                    "('succeeded', 'failed')"
                )
            ).fetchone()
            if row[0] == 0:
                return
            await asyncio.sleep(0.01)


# -- the table ---------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_table(rows: list[Row]) -> None:
    print()
    print("| system | database | workers | jobs | jobs/s | claim p50 ms | claim p99 ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.system} | {row.database} | {row.setup} | {row.jobs} | {row.rate:,.0f} | "
            f"{statistics.median(row.claim_ms):.1f} | {_percentile(row.claim_ms, 0.99):.1f} |"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per row (default 5000)")
    parser.add_argument("--only", choices=["sqlite", "postgres", "procrastinate"], default=None)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="claybot-bench-jobs-") as scratch:
        plan: list[tuple[str, Any]] = []
        if args.only in (None, "sqlite"):
            plan += [("sqlite", (1, 0)), ("sqlite", (4, 0))]
        if args.only in (None, "postgres"):
            plan += [("postgres", (n, 0)) for n in (1, 4, 16, 32)]
            plan += [("postgres", (0, p)) for p in (1, 2, 4)]
        if args.only in (None, "procrastinate"):
            # Its best wherever it is: one process at each concurrency, and several
            # processes of 4 (its best on a smaller machine) and of ClayBot's 32.
            plan += [("procrastinate", (1, c)) for c in (1, 4, 16, 32)]
            plan += [("procrastinate", (p, c)) for p in (2, 4) for c in (4, SLOTS_PER_PROCESS)]
        for kind, (a, b) in plan:
            if kind == "procrastinate":
                row = await procrastinate_row(a, b, args.jobs)
            else:
                database = "SQLite" if kind == "sqlite" else "PostgreSQL"
                row = await claybot_row(database, a, b, args.jobs, Path(scratch))
            print(f"  {row.system:22} {row.database:10} {row.setup:32} {row.rate:8,.0f} jobs/s",
                  file=sys.stderr, flush=True)  # fmt: skip
            rows.append(row)
    print_table(rows)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt), event_loop_runner() as runner:
        runner.run(main())  # the engine's own loop (uvloop), as `claybot start` runs it
