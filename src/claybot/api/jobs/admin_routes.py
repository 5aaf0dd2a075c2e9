"""Seed 002's admin routes under ``/api/v1/admin`` (the ``admin`` scope): keys, workers,
metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from claybot.api.deps import JobsDep, KeysDep
from claybot.api.responses import seed_errors
from claybot.jobs.model import WorkerStatus
from claybot.kernel.errors import NotFound
from claybot.wire.bodies import NO_NUL
from claybot.wire.jobs import (
    JobsApiKey,
    KeyCreated,
    KeyList,
    Metrics,
    NewKey,
    WorkerList,
)

router = APIRouter(
    prefix="/api/v1/admin",
    tags=["jobs admin (seed 002)"],
    responses=seed_errors(400, 404, 413, 500, 503, 507),
)


@router.get("/keys", summary="API keys (never the keys themselves), oldest first")
async def list_keys(keys: KeysDep, active_only: bool = True) -> KeyList:
    """``active_only=false`` lists revoked keys too (seed 002's keys page asks so)."""
    records = await keys.list()
    listed = [JobsApiKey.of(record) for record in records if not (active_only and record.revoked)]
    return KeyList(keys=listed, count=len(listed))


@router.post("/keys", status_code=201, summary="Create an API key (shown once)")
async def create_key(keys: KeysDep, body: NewKey) -> KeyCreated:
    record, plaintext = await keys.create(
        body.name, body.scopes, body.rate_limit_rpm, body.owner_email
    )
    return KeyCreated(id=record.id, key=plaintext, message="Store this key now: it is shown once.")


@router.delete("/keys/{key_id}", summary="Revoke an API key")
async def revoke_key(
    keys: KeysDep, key_id: Annotated[str, Path(max_length=64, pattern=NO_NUL)]
) -> JobsApiKey:
    record = await keys.revoke(key_id)
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
async def list_workers(jobs: JobsDep, status: WorkerStatus | None = None) -> WorkerList:
    return WorkerList.of(await jobs.workers(status))


@router.get("/metrics", summary="Jobs, workers, MCP servers and keys in numbers")
async def metrics(jobs: JobsDep, keys: KeysDep) -> Metrics:
    return Metrics.of(await jobs.metrics(), await keys.list())
