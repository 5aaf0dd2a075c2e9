"""A worker's drain gives back every job it holds, on SQLite and PostgreSQL: also one
whose claim was being committed when ``stop`` began. That job was started after
``stop`` had listed the jobs to drain, so it was neither drained nor cancelled: it ran
on after the worker stopped (an engine stopping logged "ending a job failed: the job
store is closed") and stayed ``running`` until its lease ran out.

The claim in flight is made deterministic by a gate in front of the worker's second
claim; the runner is a stand-in that holds its job until told to stop and then gives
it back as the real one does (``db.jobs.release``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim, JobStatus, NewJob
from claybot.jobs.runner import Stop, StopSignal
from claybot.jobs.signals import JobSignals
from claybot.jobs.worker import Worker


class GatedJobs:
    """The job store, its claims after the first waiting at ``gate``."""

    def __init__(self, jobs: Any) -> None:
        self._jobs = jobs
        self.claims = 0
        self.waiting = asyncio.Event()
        self.gate = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jobs, name)

    async def claim_many(self, worker_id: str, limit: int) -> list[Claim]:
        self.claims += 1
        if self.claims > 1:
            self.waiting.set()
            await self.gate.wait()
        claims: list[Claim] = await self._jobs.claim_many(worker_id, limit)
        return claims


@dataclass
class GatedDatabase:
    jobs: GatedJobs
    workers: Any
    tables: Any


@dataclass
class HoldingRunner:
    """Holds each job until its stop signal, then gives it back to the queue (a job in
    ``after``: once the job named there has started, as a real drain takes a while)."""

    db: JobDatabase
    started: dict[str, asyncio.Event] = field(default_factory=dict)
    stopped_by: dict[str, Stop] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)

    def started_event(self, job_id: str) -> asyncio.Event:
        return self.started.setdefault(job_id, asyncio.Event())

    async def run(self, claim: Claim, signal: StopSignal) -> JobStatus | None:
        self.started_event(claim.job.id).set()
        self.stopped_by[claim.job.id] = await signal.wait()
        if claim.job.id in self.after:
            async with asyncio.timeout(10):
                await self.started_event(self.after[claim.job.id]).wait()
        await self.db.jobs.release(claim)
        return JobStatus.QUEUED

    async def close(self) -> None:
        pass


async def test_a_job_claimed_while_the_worker_stops_is_given_back(jobs_db: JobDatabase) -> None:
    gated = GatedJobs(jobs_db.jobs)
    runner = HoldingRunner(jobs_db)
    signals = JobSignals(jobs_db.tables)
    worker = Worker(
        GatedDatabase(gated, jobs_db.workers, jobs_db.tables),  # type: ignore[arg-type]
        runner,  # type: ignore[arg-type]
        signals,
        worker_id="w",
        slots=2,
        poll_s=60,
    )
    first = await jobs_db.jobs.create(NewJob("first"))
    await worker.start()
    async with asyncio.timeout(10):
        await runner.started_event(first.id).wait()
        second = await jobs_db.jobs.create(NewJob("second"))  # heard: a second claim
        await gated.waiting.wait()
    runner.after[first.id] = second.id  # the first drains while the second is claimed

    stopping = asyncio.create_task(worker.stop(drain_timeout_s=10))
    await asyncio.sleep(0)  # stop has begun: it drains what it holds
    gated.gate.set()  # and now the claim in flight commits
    async with asyncio.timeout(20):
        await stopping

    assert runner.stopped_by == {first.id: Stop.DRAIN, second.id: Stop.DRAIN}
    for job in (first, second):
        assert (await jobs_db.jobs.get(job.id)).status is JobStatus.QUEUED
    assert {row.id: row.status for row in await jobs_db.workers.listing()} == {"w": "stopped"}
    await signals.close()
