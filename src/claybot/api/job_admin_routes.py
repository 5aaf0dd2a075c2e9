"""Seed 002's admin routes under ``/api/v1/admin`` (the ``admin`` scope): keys, workers,
metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, get_args

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from claybot.api.job_routes import jobs_db
from claybot.api.models.base import Answer
from claybot.api.models.jobs import Metrics, WorkerHealth, WorkerHealthName, WorkerList
from claybot.api.models.keys import ApiKey
from claybot.api.responses import seed_errors
from claybot.api.routes import engine_of
from claybot.api.schemas import JSON_INTEGER, NO_NUL
from claybot.db.keys import ScopeName
from claybot.jobs.model import WorkerStatus
from claybot.kernel.errors import NotFound

router = APIRouter(
    prefix="/api/v1/admin",
    tags=["jobs admin (seed 002)"],
    responses=seed_errors(400, 404, 413, 500, 503, 507),
)
HEALTHY_S = 60  # a worker heard from this recently is healthy; twice as long, a warning
WARNING_S = 120


DEFAULT_SCOPES: list[ScopeName] = ["jobs:write", "jobs:read"]  # seed 002's default


class NewKey(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(min_length=1, max_length=128, pattern=NO_NUL)
    scopes: list[ScopeName] = Field(default_factory=lambda: list(DEFAULT_SCOPES), min_length=1)
    rate_limit_rpm: Annotated[int, Field(ge=1, le=10_000), JSON_INTEGER] = 60


class KeyCreated(Answer):
    id: str
    key: str = Field(description="Shown this once; only its hash is kept")
    message: str


class KeyList(Answer):
    keys: list[ApiKey]


def _health(status: WorkerStatus, age_s: float) -> WorkerHealthName:
    """Seed 002's health by the time since the worker was last heard from; a worker that
    is gone is its status (seed 002 had no ``stopped``: it listed those as dead)."""
    if status in ("stopped", "dead"):
        return status
    if age_s < HEALTHY_S:
        return "healthy"
    return "warning" if age_s < WARNING_S else "dead"


@router.get("/keys", summary="API keys (never the keys themselves)")
async def list_keys(request: Request) -> KeyList:
    return KeyList(keys=[ApiKey.of(record) for record in await engine_of(request).keys.list()])


@router.post("/keys", status_code=201, summary="Create an API key (shown once)")
async def create_key(request: Request, body: NewKey) -> KeyCreated:
    record, plaintext = await engine_of(request).keys.create(
        body.name, body.scopes, body.rate_limit_rpm
    )
    return KeyCreated(id=record.id, key=plaintext, message="Store this key now: it is shown once.")


@router.delete("/keys/{key_id}", summary="Revoke an API key")
async def revoke_key(
    request: Request, key_id: Annotated[str, Path(max_length=64, pattern=NO_NUL)]
) -> ApiKey:
    record = await engine_of(request).keys.revoke(key_id)
    if record is None:
        raise NotFound(f"no API key {key_id!r}")
    return ApiKey.of(record)


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
                seconds_since_heartbeat=round(age, 1),
            )
        )
    summary = dict.fromkeys(get_args(WorkerHealthName), 0)
    for worker in workers:
        summary[worker.health] += 1
    return WorkerList(workers=workers, summary=summary)


@router.get("/metrics", summary="Jobs, workers and keys in numbers")
async def metrics(request: Request) -> Metrics:
    db = await jobs_db(request)
    jobs = await db.jobs.counts()
    jobs["total"] = sum(jobs.values())
    workers: dict[str, int] = {}
    for row in await db.workers.listing():
        workers[row.status] = workers.get(row.status, 0) + 1
    keys = await engine_of(request).keys.list()
    servers, verified = await db.registry.counts()
    return Metrics(
        jobs=jobs,
        jobs_last_hour=await db.jobs.activity_since(datetime.now(UTC) - timedelta(hours=1)),
        workers=workers,
        keys={"total": len(keys), "active": sum(1 for key in keys if not key.revoked)},
        agents={"total": servers, "verified": verified},
    )
