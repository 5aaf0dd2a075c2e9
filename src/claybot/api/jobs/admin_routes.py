"""Seed 002's admin routes under ``/api/v1/admin`` (the ``admin`` scope): keys, workers,
metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, get_args

from fastapi import APIRouter, Path, Request

from claybot.api.engine.routes import engine_of
from claybot.api.jobs.routes import jobs_db
from claybot.api.responses import seed_errors
from claybot.jobs.model import WorkerStatus
from claybot.kernel.errors import NotFound
from claybot.wire.bodies import NO_NUL
from claybot.wire.jobs import (
    JobActivity,
    JobCounts,
    JobsApiKey,
    JobStatusName,
    KeyCounts,
    KeyCreated,
    KeyList,
    Metrics,
    NewKey,
    ServerCounts,
    WorkerCounts,
    WorkerHealth,
    WorkerHealthName,
    WorkerList,
)

router = APIRouter(
    prefix="/api/v1/admin",
    tags=["jobs admin (seed 002)"],
    responses=seed_errors(400, 404, 413, 500, 503, 507),
)
HEALTHY_S = 60  # a worker heard from this recently is healthy; twice as long, a warning
WARNING_S = 120


def _health(status: WorkerStatus, age_s: float) -> WorkerHealthName:
    """Seed 002's health by the time since the worker was last heard from; a worker that
    is gone is its status (seed 002 had no ``stopped``: it listed those as dead)."""
    if status in ("stopped", "dead"):
        return status
    if age_s < HEALTHY_S:
        return "healthy"
    return "warning" if age_s < WARNING_S else "dead"


@router.get("/keys", summary="API keys (never the keys themselves), oldest first")
async def list_keys(request: Request, active_only: bool = True) -> KeyList:
    """``active_only=false`` lists revoked keys too (seed 002's keys page asks so)."""
    records = await engine_of(request).keys.list()
    keys = [JobsApiKey.of(record) for record in records if not (active_only and record.revoked)]
    return KeyList(keys=keys, count=len(keys))


@router.post("/keys", status_code=201, summary="Create an API key (shown once)")
async def create_key(request: Request, body: NewKey) -> KeyCreated:
    record, plaintext = await engine_of(request).keys.create(
        body.name, body.scopes, body.rate_limit_rpm, body.owner_email
    )
    return KeyCreated(id=record.id, key=plaintext, message="Store this key now: it is shown once.")


@router.delete("/keys/{key_id}", summary="Revoke an API key")
async def revoke_key(
    request: Request, key_id: Annotated[str, Path(max_length=64, pattern=NO_NUL)]
) -> JobsApiKey:
    record = await engine_of(request).keys.revoke(key_id)
    if record is None:
        raise NotFound(f"no API key {key_id!r}")
    return JobsApiKey.of(record)


@router.get(
    "/workers",
    summary="Workers and how recently each was heard from",
    description="A worker is `active`, `draining` while it gives its jobs back, `stopped` "
    "once it stopped cleanly, `dead` when it went silent without stopping for longer than "
    "the job lease (`jobs.leaseS`). A stopped worker is listed for an hour after it "
    "stopped, a dead one for a day after it was last heard from.",
)
async def list_workers(request: Request, status: WorkerStatus | None = None) -> WorkerList:
    db = await jobs_db(request)
    now = db.tables.clock()
    workers = []
    for row in await db.workers.listing(status):
        age = (now - row.last_heartbeat).total_seconds()
        workers.append(
            WorkerHealth(
                id=row.id,
                hostname=row.hostname,
                status=row.status,
                health=_health(row.status, age),
                active_jobs=row.active_jobs,
                version=row.version,
                last_heartbeat=row.last_heartbeat.isoformat(),
                seconds_since_heartbeat=round(age),
            )
        )
    summary = dict.fromkeys(get_args(WorkerHealthName), 0)
    for worker in workers:
        summary[worker.health] += 1
    return WorkerList(workers=workers, summary=summary)


@router.get("/metrics", summary="Jobs, workers, MCP servers and keys in numbers")
async def metrics(request: Request) -> Metrics:
    db = await jobs_db(request)
    jobs: dict[JobStatusName, int] = dict.fromkeys(get_args(JobStatusName), 0)
    jobs.update(await db.jobs.counts())  # type: ignore[arg-type]  # the statuses above
    workers: dict[WorkerStatus, int] = dict.fromkeys(get_args(WorkerStatus), 0)
    for row in await db.workers.listing():
        workers[row.status] += 1
    records = await engine_of(request).keys.list()
    keys = KeyCounts(total=len(records), active=sum(1 for key in records if not key.revoked))
    servers, verified = await db.registry.counts()
    now = datetime.now(UTC)
    last_hour = JobActivity(**await db.jobs.activity_since(now - timedelta(hours=1)))
    return Metrics(
        jobs=JobCounts(by_status=jobs, total=sum(jobs.values()), last_hour=last_hour),
        workers=WorkerCounts(by_status=workers, total=sum(workers.values())),
        agents=ServerCounts(total=servers, verified=verified),
        api_keys=keys,
        timestamp=now.isoformat(),
        jobs_last_hour=last_hour,
        keys=keys,
    )
