"""`claybot worker` processes on PostgreSQL. Two of them, and the one running a job is
killed with SIGKILL in the middle of it: the job finishes once, on the other worker, from
its last checkpoint; the dead worker's writes are refused; no step's effect is recorded
twice. And an engine hears what a worker process does (NOTIFY) on its event stream."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from claybot.db.database import create_database_engine, migrate
from claybot.engine.engine import Engine, EngineOptions
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim, HitlMode, JobStatus, LeaseLost, NewJob
from claybot.server.app import create_app
from tests.conftest import write_settings

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


RULES = [
    {"match": "Task: two steps", "response": call("write_file", filename="one.txt", content="1")},
    # The step the worker is killed in: a script that would run for two minutes.
    {"match": "Wrote one.txt", "response": call("run_python", code="import time\ntime.sleep(120)")},
    # On the other worker, the model learns that step was interrupted (and not rerun).
    {"match": "may or may not", "response": call("write_file", filename="two.txt", content="2")},
    {"match": "Wrote two.txt", "response": call("final_answer", answer="Both steps done.")},
]  # fmt: skip
LEASE_S = 3.0


@pytest.fixture
async def db(fresh_postgres_url: str) -> AsyncIterator[JobDatabase]:
    engine = create_database_engine(fresh_postgres_url)
    await migrate(engine)
    db = JobDatabase(engine)
    yield db
    await db.close()
    await engine.dispose()


def start_worker(paths: HomePaths, url: str, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "claybot", "worker", "--id", name, "--slots", "1"],
        env={**os.environ, "CLAYBOT_HOME": str(paths.home), "CLAYBOT_DATABASE_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def logged(db: JobDatabase, job_id: str) -> list[str]:
    return [line.message for line in await db.logs.page(job_id, limit=1000)]


async def test_a_job_whose_worker_is_killed_finishes_once_on_the_other(
    paths: HomePaths, fresh_postgres_url: str, db: JobDatabase
) -> None:
    write_settings(
        paths,
        {
            "providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}],
            "jobs": {"workers": 1, "leaseS": LEASE_S},
        },
    )
    workers = {name: start_worker(paths, fresh_postgres_url, name) for name in ("w1", "w2")}
    try:
        job = await db.jobs.create(NewJob("two steps", hitl_mode=HitlMode.AUTO_EXECUTE))
        async with asyncio.timeout(60):  # until the script is running on one of them
            while not any(m.startswith("Tool call: run_python") for m in await logged(db, job.id)):
                await asyncio.sleep(0.1)
        running = await db.jobs.get(job.id)
        assert running.status is JobStatus.RUNNING and running.worker_id in workers
        killed = running.worker_id
        workers[killed].send_signal(signal.SIGKILL)
        workers[killed].wait(timeout=10)

        async with asyncio.timeout(60):  # its lease runs out; the other worker goes on
            while (done := await db.jobs.get(job.id)).status not in (
                JobStatus.COMPLETED,
                JobStatus.FAILED,
            ):
                await asyncio.sleep(0.1)
        assert (done.status, done.result) == (JobStatus.COMPLETED, "Both steps done.")
        assert (done.attempt, done.retry_count) == (running.attempt + 1, 1)

        # The late write of the dead worker's claim is refused, whatever it writes.
        stale = Claim(running, killed, running.attempt)
        with pytest.raises(LeaseLost):
            await db.logs.add(job.id, "late line", claim=stale)
        with pytest.raises(LeaseLost):
            await db.files.put_artifact(stale, "late.txt", b"late", "text/plain")
        with pytest.raises(LeaseLost):
            await db.jobs.finish(stale, JobStatus.FAILED, error="late")
        assert (await db.jobs.get(job.id)).result == "Both steps done."

        # Every step's effect once: the first artifact from before the kill, the second
        # from after; each log line once; the interrupted script not run again.
        artifacts = {f.filename: f for f in await db.files.artifacts(job.id)}
        assert sorted(artifacts) == ["one.txt", "two.txt"]
        messages = await logged(db, job.id)
        assert "late line" not in messages
        counts = collections.Counter(messages)
        assert [m for m, n in counts.items() if n > 1] == []
        for once in ("Job created", "Job started", "Artifact written: one.txt (1 bytes)",
                     "Artifact written: two.txt (1 bytes)", "Job completed"):  # fmt: skip
            assert counts[once] == 1, (once, messages)
        assert sum(m.startswith("Tool call: run_python") for m in messages) == 1

        survivor = next(name for name in workers if name != killed)
        workers[survivor].send_signal(signal.SIGTERM)
        out, _ = workers[survivor].communicate(timeout=30)
        assert f"{job.id}  attempt {running.attempt + 1}" in out  # the survivor ran it
        listed = {row.id: row.status for row in await db.workers.listing()}
        assert listed[survivor] == "stopped"  # it said so as it stopped
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.kill()
                process.wait()


async def test_an_engine_relays_what_a_worker_process_does_onto_its_event_stream(
    paths: HomePaths, fresh_postgres_url: str
) -> None:
    quick = [{"match": "Task: quick", "response": call("final_answer", answer="Done.")}]
    write_settings(
        paths,
        {
            "providers": [{"id": "scripted", "model": "rules", "options": {"rules": quick}}],
            "jobs": {"workers": 0},  # the engine runs nothing itself
        },
    )
    engine = Engine(
        paths,
        EngineOptions(
            port=0, env={"PATH": "/usr/bin:/bin", "CLAYBOT_DATABASE_URL": fresh_postgres_url}
        ),
    )
    await engine.start()
    seen: list[tuple[str, dict[str, Any]]] = []
    engine.events.add_listener(lambda event: seen.append((event.type, event.payload)))
    worker = start_worker(paths, fresh_postgres_url, "elsewhere")
    try:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
            created = await client.post(
                "/api/v1/jobs", json={"task": "quick", "hitl_mode": "auto_execute"}
            )
            job_id = created.json()["id"]
            completed = ("job.status", {"jobId": job_id, "status": "completed"})
            async with asyncio.timeout(30):  # written by the worker process, heard here
                while completed not in seen:
                    await asyncio.sleep(0.05)
        kinds = [
            (kind, payload.get("status"))
            for kind, payload in seen
            if payload.get("jobId") == job_id
        ]
        assert ("job.status", "running") in kinds and ("job.log", None) in kinds
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
        await engine.stop(drain_timeout_s=2)
