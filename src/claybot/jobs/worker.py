"""A worker: claims queued jobs and runs them, up to ``slots`` at once.

It claims while it has a free slot and jobs are queued, then sleeps until a job is
queued (a signal: in this process, or NOTIFY from another) or ``poll_s`` passes,
whichever is first; polling is only the fallback. A heartbeat every third of the
lease records the worker and extends its jobs' leases, and learns which of them
were cancelled or lost. Every worker also sweeps: jobs whose lease ran out go
back to the queue (or fail, their retries spent), and silent workers are marked
dead. ``stop`` drains: no more claims, and the running jobs go back to the queue
from their last checkpoint, not failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from claybot import __version__
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim, JobStatus, WorkerStatus
from claybot.jobs.runner import JobRunner, Stop, StopSignal
from claybot.jobs.signals import JobSignals

log = logging.getLogger(__name__)


@dataclass
class Running:
    claim: Claim
    signal: StopSignal
    task: asyncio.Task[JobStatus | None]


@dataclass
class WorkerStats:
    claimed: int = 0
    finished: dict[str, int] = field(default_factory=dict)


def default_worker_id(suffix: str = "") -> str:
    return f"{socket.gethostname()}-{os.getpid()}{suffix}"


class Worker:
    def __init__(
        self,
        db: JobDatabase,
        runner: JobRunner,
        signals: JobSignals,
        *,
        worker_id: str | None = None,
        slots: int = 2,
        poll_s: float = 2.0,
        on_change: Callable[[Worker], None] | None = None,
    ) -> None:
        self.db = db
        self.runner = runner
        self.signals = signals
        self.id = worker_id or default_worker_id()
        self.slots = slots
        self.poll_s = poll_s
        self.running: dict[str, Running] = {}
        self.stats = WorkerStats()
        self._on_change = on_change
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._claims: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._claiming = False
        self._cancelled_while_claiming: set[str] = set()

    @property
    def heartbeat_s(self) -> float:
        return self.db.tables.lease.total_seconds() / 3

    async def start(self) -> None:
        self._unsubscribe = self.signals.subscribe(self._heard)
        await self._heartbeat_once()
        claims = asyncio.create_task(self._claim_loop(), name=f"worker-{self.id}-claims")
        self._claims = claims
        self._tasks = [
            claims,
            asyncio.create_task(self._heartbeat_loop(), name=f"worker-{self.id}-heartbeat"),
        ]

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        """Claim nothing more; give the running jobs back to the queue."""
        self._stopping = True
        self._wake.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
        # The claim loop ends by itself once woken; first, so that a claim it is
        # committing becomes a job drained below, not one left running after the stop.
        if self._claims is not None:
            await asyncio.wait([self._claims], timeout=drain_timeout_s)
        for running in list(self.running.values()):
            running.signal.stop(Stop.DRAIN)
        jobs: list[asyncio.Task[Any]] = [running.task for running in self.running.values()]
        if jobs:
            await asyncio.wait(jobs, timeout=drain_timeout_s)
        # A job that did not give itself back in time is requeued by the sweeper.
        everything: list[asyncio.Task[Any]] = [*self._tasks, *jobs]
        for task in everything:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self.runner.close()
        # Said as it goes, so the list tells a clean stop from a worker that was lost
        # (killed, or its machine gone: silent, then marked dead by the sweep).
        with contextlib.suppress(Exception):
            await self._heartbeat_once(status="stopped")

    # -- signals --------------------------------------------------------------------

    def _heard(self, kind: str, payload: dict[str, object]) -> None:
        if kind == "job.created" or (kind == "job.status" and payload.get("status") == "queued"):
            self._wake.set()
        elif kind == "job.cancel_requested":
            job_id = str(payload.get("jobId"))
            running = self.running.get(job_id)
            if running is not None:
                running.signal.stop(Stop.CANCEL)
            elif self._claiming:
                # Cancelled while its claim was being committed: stopped as it starts.
                self._cancelled_while_claiming.add(job_id)

    # -- claiming -------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            while len(self.running) < self.slots and not self._stopping:
                free = self.slots - len(self.running)
                self._claiming = True
                try:
                    claims = await self.db.jobs.claim_many(self.id, free)
                except Exception as exc:
                    log.warning(
                        "claiming jobs failed: %s", exc, extra={"action": "job.claim_failed"}
                    )
                    break
                finally:
                    self._claiming = False
                for claim in claims:
                    self._start(claim)
                if len(claims) < free:
                    break
            self._cancelled_while_claiming.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_s):
                    await self._wake.wait()

    def _start(self, claim: Claim) -> None:
        job = claim.job
        self.stats.claimed += 1
        signal = StopSignal()
        task = asyncio.create_task(self.runner.run(claim, signal), name=f"job-{job.id}")
        self.running[job.id] = Running(claim, signal, task)
        if job.id in self._cancelled_while_claiming:
            signal.stop(Stop.CANCEL)
        task.add_done_callback(lambda done: self._finished(job.id, done))
        self._changed()

    def _finished(self, job_id: str, task: asyncio.Task[JobStatus | None]) -> None:
        self.running.pop(job_id, None)
        if task.cancelled():
            status = "released"
        elif task.exception() is not None:
            log.error(
                "a job run failed unexpectedly",
                exc_info=task.exception(),
                extra={"action": "job.run_failed", "jobId": job_id},
            )
            status = "error"
        else:
            result = task.result()
            status = result.value if result is not None else "lost"
        self.stats.finished[status] = self.stats.finished.get(status, 0) + 1
        self._wake.set()  # a slot is free
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    # -- heartbeat and sweeping ---------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._heartbeat_once()
                renewal = await self.db.jobs.renew(self.id, list(self.running))
                for job_id in renewal.cancelled:
                    self._stop(job_id, Stop.CANCEL)
                for job_id in renewal.lost:
                    self._stop(job_id, Stop.LOST)
                await self.db.jobs.sweep()
                swept = await self.db.workers.sweep()
                if swept.dead:
                    log.warning(
                        "%d worker(s) went silent for a lease without stopping: marked dead "
                        "(their jobs went back to the queue); see GET /api/v1/admin/workers",
                        swept.dead,
                        extra={"action": "job.workers_dead"},
                    )
            except Exception as exc:  # the database is away: try again next beat
                log.warning("a worker heartbeat failed: %s", exc, extra={"action": "job.heartbeat"})

    def _stop(self, job_id: str, reason: Stop) -> None:
        running = self.running.get(job_id)
        if running is not None:
            running.signal.stop(reason)

    async def _heartbeat_once(self, status: WorkerStatus = "active") -> None:
        await self.db.workers.heartbeat(
            self.id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            version=__version__,
            active_jobs=len(self.running),
            status="draining" if self._stopping and status == "active" else status,
        )
