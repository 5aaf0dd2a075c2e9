"""Seed 002's MCP server registry under ``/api/v1``: list (``agents:read``), register
(``agents:write``), discover (``agents:read``), and verify (``admin``).

Registering stores a server unverified. Verifying connects to it and records the
tools it lists; only then can a job discover it and call them. That is an admin's
act because a job that calls a stdio server starts its command on the worker's
machine.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Request

from claybot.api.bounds import Offset
from claybot.api.deps import JobsDep
from claybot.api.responses import seed_errors
from claybot.jobs.registry_model import NewServer
from claybot.wire.registry import (
    Discover,
    Discovered,
    DiscoverResult,
    McpServer,
    McpServerList,
    RegisterServer,
)

router = APIRouter(
    prefix="/api/v1", tags=["MCP registry (seed 002)"], responses=seed_errors(400, 404, 500, 503)
)
DISCOVER_PATH = "/api/v1/agents/discover"


@router.get("/agents", summary="MCP servers in the registry")
async def list_servers(
    jobs: JobsDep,
    verified_only: bool = True,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Offset = 0,
) -> McpServerList:
    servers, count = await jobs.servers(verified_only=verified_only, limit=limit, offset=offset)
    return McpServerList(
        agents=[McpServer.of(server) for server in servers],
        count=count,
        offset=offset,
        limit=limit,
    )


@router.post(
    "/agents",
    status_code=201,
    summary="Register an MCP server (unverified until an admin verifies it)",
    responses=seed_errors(409),
)
async def register_server(jobs: JobsDep, body: RegisterServer) -> McpServer:
    server = await jobs.register_server(
        NewServer(
            name=body.name,
            description=body.description,
            package_name=body.package_name,
            version=body.version,
            transport=body.transport,
            command=body.command,
            args=tuple(body.args),
            env=body.env,
            url=body.url,
            category=body.category,
            documentation=body.documentation,
            author=body.author,
            repository_url=body.repository_url,
        )
    )
    return McpServer.of(server)


@router.post("/agents/discover", summary="Verified MCP servers that fit a task")
async def discover(jobs: JobsDep, body: Discover) -> DiscoverResult:
    matches = await jobs.discover(body.task, limit=body.limit, threshold=body.threshold)
    return DiscoverResult(
        agents=[Discovered.of(match) for match in matches],
        count=len(matches),
        threshold=body.threshold,
    )


@router.post(
    "/admin/agents/{server_id}/verify",
    summary="Connect to an MCP server, record its tools and mark it verified",
    responses=seed_errors(502),
)
async def verify_server(request: Request, jobs: JobsDep, server_id: UUID) -> McpServer:
    record = request.scope.get("state", {}).get("api_key")
    verified_by = "owner (socket)" if record is None else f"key {record.name}"
    return McpServer.of(await jobs.verify_server(str(server_id), verified_by))
