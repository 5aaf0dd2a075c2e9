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
from claybot.api.engine.routes import engine_of
from claybot.api.jobs.routes import jobs_db
from claybot.api.responses import seed_errors
from claybot.jobs.registry_model import NewServer
from claybot.kernel.errors import ClayError
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


class ServerUnreachable(ClayError):
    code = "MCP_UNAVAILABLE"
    status = 502


@router.get("/agents", summary="MCP servers in the registry")
async def list_servers(
    request: Request,
    verified_only: bool = True,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Offset = 0,
) -> McpServerList:
    db = await jobs_db(request)
    servers, count = await db.registry.listing(
        verified_only=verified_only, limit=limit, offset=offset
    )
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
async def register_server(request: Request, body: RegisterServer) -> McpServer:
    db = await jobs_db(request)
    server = await db.registry.register(
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
async def discover(request: Request, body: Discover) -> DiscoverResult:
    db = await jobs_db(request)
    matches = await db.registry.search(body.task, limit=body.limit, threshold=body.threshold)
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
async def verify_server(request: Request, server_id: UUID) -> McpServer:
    # Imported here: the MCP SDK and the registry load at the first verification.
    from claybot.jobs.mcp_servers import list_tools, load_sdk

    await load_sdk()
    from claybot.mcp_client.connection import McpServerError

    db = await jobs_db(request)
    server = await db.registry.get(str(server_id))
    engine = engine_of(request)
    try:
        tools = await list_tools(server, engine.jobs.workroot / ".mcp")
    except McpServerError as exc:
        raise ServerUnreachable(f"MCP server {server.name!r} could not be reached: {exc}") from exc
    record = request.scope.get("state", {}).get("api_key")
    verified_by = "owner (socket)" if record is None else f"key {record.name}"
    return McpServer.of(await db.registry.mark_verified(server.id, tools, verified_by))
