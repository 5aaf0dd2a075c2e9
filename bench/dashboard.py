"""Benchmark the dashboard's pages: time to render each, with 10,000 agents and 10,000 jobs.

Starts an engine on a home that already holds 10,000 agents of 100 history records each
(written straight in the on-disk format, as ``bench/agents.py`` does) and 10,000 jobs in
every status (inserted through the job database's writer, a thousand rows a transaction,
before the engine starts; its workers are off, so none of them moves), logs in through a
one-time link as a browser would, and requests each page ``--runs`` times over loopback
TCP, one at a time. Prints p50 and p99 per page: the time from sending the request to the
last byte of the page, which on loopback is the engine's render time. The target of
issue 14 is a p99 under 50 ms for every page. The job timed on its own page waits for
its plan to be approved (the markdown is rendered) and has 200 log lines and an artifact.

    .venv/bin/python bench/dashboard.py [--agents N] [--jobs N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, insert

import claybot
from agents import SETTINGS, compile_bytecode, fresh_home, populate, start_engine
from claybot.config.home import HomePaths
from claybot.db.database import create_database_engine, migrate
from claybot.db.location import database_url
from claybot.db.tables import job_artifacts, job_logs, job_queue
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import JobStatus
from claybot.jobs.writer import Events

JOB_BATCH = 1000  # rows a transaction
STATUSES = list(JobStatus)
PLAN = "## Proposed plan\n\n" + "\n".join(f"{n}. Step {n}: do *that* `thing`" for n in range(1, 21))
WORKERS = 20


def _job_row(n: int, now: datetime) -> dict[str, Any]:
    status = STATUSES[n % len(STATUSES)]
    created = now - timedelta(seconds=n)
    ended = status in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)
    return {
        "id": str(uuid.uuid4()),
        "task": f"bench task {n}: summarise report {n} and write the findings down",
        "status": status.value,
        "hitl_mode": "plan_approval",
        "created_at": created,
        "updated_at": created,
        "started_at": None if status is JobStatus.QUEUED else created,
        "completed_at": created if ended else None,
        "result": "Done." if status is JobStatus.COMPLETED else None,
        "error_message": "It broke." if status is JobStatus.FAILED else None,
        "agent_question": (
            json.dumps({"type": "plan", "plan": PLAN, "question": "Go?"})
            if status is JobStatus.WAITING_FOR_USER
            else None
        ),
    }


async def seed_jobs(paths: HomePaths, count: int) -> str:
    """``count`` jobs through the job database's writer, in batches; the id of a waiting
    one with 200 log lines and an artifact, and ``WORKERS`` workers' heartbeats."""
    engine = create_database_engine(database_url(paths, os.environ))
    await migrate(engine)
    db = JobDatabase(engine)
    now = datetime.now(UTC)
    try:
        for first in range(0, count, JOB_BATCH):
            rows = [_job_row(n, now) for n in range(first, min(count, first + JOB_BATCH))]

            def write(connection: Connection, _events: Events, rows: list[Any] = rows) -> None:
                connection.execute(insert(job_queue), rows)

            await db.tables.write("seeding jobs", write)
        waiting = _job_row(STATUSES.index(JobStatus.WAITING_FOR_USER), now + timedelta(hours=1))
        lines = [
            {
                "job_id": waiting["id"],
                "level": "info",
                "message": f"step {n} done",
                "timestamp": now,
            }
            for n in range(200)
        ]
        artifact = {"id": str(uuid.uuid4()), "job_id": waiting["id"], "filename": "report.md",
                    "mime_type": "text/markdown", "content": b"# R\n" * 100, "size_bytes": 400,
                    "created_at": now}  # fmt: skip

        def write_detail(connection: Connection, _events: Events) -> None:
            connection.execute(insert(job_queue), [waiting])
            connection.execute(insert(job_logs), lines)
            connection.execute(insert(job_artifacts), [artifact])

        await db.tables.write("seeding a job's detail", write_detail)
        for n in range(WORKERS):
            await db.workers.heartbeat(
                f"worker-{n}",
                hostname=f"host-{n}",
                pid=1000 + n,
                version="bench",
                active_jobs=n % 4,
            )
        return str(waiting["id"])
    finally:
        await db.close()
        await engine.dispose()


def make_one_of_each(owner: httpx.Client) -> tuple[str, str]:
    """A webchat conversation with a turn in it, a cron task and a proactive agent, made
    through the owner's socket: their pages are timed too. Returns the task's and the
    proactive agent's ids."""
    posted = owner.post(
        "/v1/engine/webchat/messages",
        json={"userId": "dashboard", "channelId": "bench", "text": "hello"},
    )
    assert posted.status_code == 202, posted.text
    task = owner.post(
        "/v1/engine/cron/tasks",
        json={"name": "Digest", "schedule": "0 7 * * *", "prompt": "Write the digest."},
    )
    assert task.status_code == 201, task.text
    proactive = owner.post(
        "/api/agents",
        json={
            "name": "Watcher",
            "objective": "Watch.",
            "schedule": "0 8 * * *",
            "runner": "engine",
        },
    )
    assert proactive.status_code == 201, proactive.text
    return str(task.json()["task"]["taskId"]), str(proactive.json()["agent"]["id"])


def measure(base: str, link: str, ids: dict[str, str], runs: int) -> list[tuple[str, float, float]]:
    rows = []
    agent_id, job_id = ids["agent"], ids["job"]
    with httpx.Client(base_url=base, timeout=60) as browser:
        assert browser.get(link).status_code == 303, "the login link did not log in"
        pages = [
            "/",
            "/chat",
            "/chat/dashboard/bench",
            "/agents",
            "/agents?q=user42",
            f"/agents/{agent_id}",
            f"/agents/{agent_id}?before=50",
            "/permissions",
            "/automations",
            f"/automations/cron/{ids['task']}",
            "/proactive",
            f"/proactive/{ids['proactive']}",
            "/settings",
            "/settings/providers",
            "/settings/credentials",
            "/settings/keys",
            "/settings/log",
            "/jobs",
            "/jobs?status=waiting_for_user",
            "/jobs?status=completed&page=20",
            f"/jobs/{job_id}",
            "/jobs/workers",
        ]
        for path in pages:
            browser.get(path)  # warm: the first render compiles the template
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                response = browser.get(path)
                times.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{path} answered {response.status_code}")
            times.sort()
            rows.append((path, statistics.median(times), times[max(0, int(len(times) * 0.99) - 1)]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=10_000, help="agents in the home")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the database")
    parser.add_argument("--runs", type=int, default=200, help="requests per page")
    args = parser.parse_args()
    compile_bytecode(Path(claybot.__file__).parent)
    paths = fresh_home({**SETTINGS, "jobs": {"workers": 0}})  # the jobs stay as they are
    paths.agents.mkdir(parents=True)
    print(f"writing {args.agents:,} agents...", file=sys.stderr, flush=True)
    populate(paths, args.agents, 100)
    os.sync()
    agent_id = next(p.name for p in paths.agents.iterdir() if p.is_dir())
    print(f"inserting {args.jobs:,} jobs...", file=sys.stderr, flush=True)
    job_id = asyncio.run(seed_jobs(paths, args.jobs))
    process, _ = start_engine(paths)
    try:
        transport = httpx.HTTPTransport(uds=str(paths.socket))
        with httpx.Client(transport=transport, base_url="http://claybot") as owner:
            task_id, proactive_id = make_one_of_each(owner)
            url = owner.post("/v1/engine/dashboard/links").json()["url"]
        base, link = url.split("/login", 1)[0], "/login" + url.split("/login", 1)[1]
        print("timing the pages...", file=sys.stderr, flush=True)
        ids = {"agent": agent_id, "job": job_id, "task": task_id, "proactive": proactive_id}
        rows = measure(base, link, ids, args.runs)
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(paths.home, ignore_errors=True)
    print(f"\nDashboard render time, {args.agents:,} agents x 100 records, ", end="")
    print(f"{args.jobs:,} jobs, ", end="")
    print(f"{args.runs} requests a page\n")
    print("| page | p50 | p99 |")
    print("|---|---:|---:|")
    for path, p50, p99 in rows:
        print(f"| `{path}` | {p50:.1f} ms | {p99:.1f} ms |")


if __name__ == "__main__":
    main()
