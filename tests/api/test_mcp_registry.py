"""Seed 002's MCP registry through the HTTP doors, on SQLite and PostgreSQL: register,
verify against a real MCP server (the official SDK's, over stdio), search with the
database's own full-text index, and a job that discovers the server and calls its
tool; scopes, duplicates, garbage queries and an unreachable server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.config.home import HomePaths
from claybot.engine.engine import Engine
from claybot.server.app import create_app
from tests.conftest import engine_on_backend

ECHO_SERVER = str(Path(__file__).parent.parent / "plugins" / "mcp_echo_server.py")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


RULES = [
    {"match": "Task: shout", "response": call("discover_tools", query="capitals shouting")},
    {"match": "Tools you can call now", "response": call("mcp__echo__shout", text="hello")},
    {"match": "HELLO!", "response": call("final_answer", answer="The server said HELLO!")},
]
SETTINGS = {"providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}]}
ECHO = {
    "name": "echo",
    "description": "Shouts text in capitals and adds numbers",
    "package_name": "@claybot-tests/echo",  # scoped: seed 002's pattern refused these
    "category": "text",
    "command": sys.executable,
    "args": [ECHO_SERVER],
}


@pytest.fixture(params=["sqlite", "postgres"])
async def engine(request: pytest.FixtureRequest, paths: HomePaths) -> AsyncIterator[Engine]:
    async with engine_on_backend(request, paths, SETTINGS) as engine:
        yield engine


@pytest.fixture
async def owner(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
        yield client


@pytest.fixture
def tcp(engine: Engine) -> Callable[[str], httpx.AsyncClient]:
    app = ApiKeyMiddleware(create_app(engine), engine.keys)

    def client(key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://claybot",
            headers={"X-API-Key": key},
        )

    return client


async def register(client: httpx.AsyncClient, body: dict[str, Any] = ECHO) -> dict[str, Any]:
    response = await client.post("/api/v1/agents", json=body)
    assert response.status_code == 201, response.text
    server: dict[str, Any] = response.json()
    return server


async def verify(client: httpx.AsyncClient, server_id: str) -> dict[str, Any]:
    response = await client.post(f"/api/v1/admin/agents/{server_id}/verify")
    assert response.status_code == 200, response.text
    server: dict[str, Any] = response.json()
    return server


async def test_a_verified_server_is_found_and_a_job_calls_its_tool(
    owner: httpx.AsyncClient,
) -> None:
    server = await register(owner)
    assert server["verified"] is False and server["tools"] == []
    assert "command" not in server and "env" not in server  # tokens travel there
    assert (await owner.get("/api/v1/agents")).json()["agents"] == []  # verified only
    listed = (await owner.get("/api/v1/agents", params={"verified_only": "false"})).json()
    assert [s["id"] for s in listed["agents"]] == [server["id"]] and listed["count"] == 1
    unverified = await owner.post("/api/v1/agents/discover", json={"task": "shout capitals"})
    assert unverified.json() == {"agents": [], "count": 0, "threshold": 0.3}

    verified = await verify(owner, server["id"])
    assert verified["verified"] is True and verified["verified_by"] == "owner (socket)"
    assert {"add", "shout", "pid"} <= {tool["name"] for tool in verified["tools"]}

    found = (
        await owner.post("/api/v1/agents/discover", json={"task": "Shouting in CAPITALS!"})
    ).json()
    assert found["count"] == 1
    assert found["agents"][0] | {"similarity": None} == {
        "id": server["id"],
        "name": "echo",
        "package_name": "@claybot-tests/echo",
        "similarity": None,
    }
    assert found["agents"][0]["similarity"] == 1.0  # both words (stemmed) matched
    half = await owner.post(
        "/api/v1/agents/discover", json={"task": "capitals weather", "threshold": 0.6}
    )
    assert half.json()["count"] == 0  # one word of two is 0.5, under the threshold
    metrics = (await owner.get("/api/v1/admin/metrics")).json()
    assert metrics["agents"] == {"total": 1, "verified": 1}

    created = await owner.post(
        "/api/v1/jobs", json={"task": "shout hello", "hitl_mode": "auto_execute"}
    )
    job_id = created.json()["id"]
    async with asyncio.timeout(60):
        while (job := (await owner.get(f"/api/v1/jobs/{job_id}")).json())["status"] not in (
            "completed",
            "failed",
        ):
            await asyncio.sleep(0.05)
    assert (job["status"], job["result"]) == ("completed", "The server said HELLO!")
    assert job["tools_discovered"] == ["@claybot-tests/echo"]
    logs = [
        entry["message"]
        for entry in (await owner.get(f"/api/v1/jobs/{job_id}/logs")).json()["logs"]
    ]
    assert "Discovered MCP servers: @claybot-tests/echo" in logs


async def test_registry_refuses_duplicates_bad_bodies_and_survives_any_query(
    owner: httpx.AsyncClient,
) -> None:
    await register(owner)
    duplicate = await owner.post("/api/v1/agents", json={**ECHO, "name": "again"})
    assert duplicate.status_code == 409
    assert duplicate.json()["code"] == "DUPLICATE"
    for bad in (
        {**ECHO, "command": None},  # stdio needs a command
        {**ECHO, "transport": "http"},  # http needs a url
        {**ECHO, "transport": "sse", "package_name": "x"},
        {**ECHO, "package_name": "no spaces allowed"},
        {**ECHO, "description": "short"},
        {**ECHO, "args": "not a list"},
    ):
        response = await owner.post("/api/v1/agents", json=bad)
        assert response.status_code == 400, (bad, response.text)
        assert response.json()["code"] == "VALIDATION_ERROR"
    # Index syntax in the query is only words to the search: never an error.
    for task in ('" OR NEAR(', "*:* | & ! ()", "agents_fts MATCH 'x'", "---", "ünïcödé ½"):
        response = await owner.post("/api/v1/agents/discover", json={"task": task})
        assert response.status_code == 200, (task, response.text)
    missing = await owner.post("/api/v1/admin/agents/00000000-0000-0000-0000-000000000000/verify")
    assert missing.status_code == 404


async def test_an_unreachable_server_is_not_verified(owner: httpx.AsyncClient) -> None:
    server = await register(
        owner, {**ECHO, "package_name": "missing", "command": "/nonexistent/mcp-server"}
    )
    response = await owner.post(f"/api/v1/admin/agents/{server['id']}/verify")
    assert response.status_code == 502
    assert response.json()["code"] == "MCP_UNAVAILABLE"
    listed = (await owner.get("/api/v1/agents", params={"verified_only": "false"})).json()
    assert listed["agents"][0]["verified"] is False


async def test_registry_scopes(
    engine: Engine, owner: httpx.AsyncClient, tcp: Callable[[str], httpx.AsyncClient]
) -> None:
    server = await register(owner)
    _, reader_key = await engine.keys.create("reader", ["agents:read"], 10_000)
    _, writer_key = await engine.keys.create("writer", ["agents:write"], 10_000)
    _, admin_key = await engine.keys.create("admin", ["admin"], 10_000)
    async with tcp(reader_key) as reader, tcp(writer_key) as writer, tcp(admin_key) as admin:
        assert (await reader.get("/api/v1/agents")).status_code == 200
        assert (await reader.post("/api/v1/agents/discover", json={"task": "x"})).status_code == 200
        assert (
            await reader.post("/api/v1/agents", json={**ECHO, "package_name": "r"})
        ).status_code == 403
        assert (
            await writer.post("/api/v1/agents", json={**ECHO, "package_name": "w"})
        ).status_code == 201
        verify_path = f"/api/v1/admin/agents/{server['id']}/verify"
        assert (await writer.post(verify_path)).status_code == 403
        assert (await reader.post(verify_path)).status_code == 403
        verified = await admin.post(verify_path)
        assert verified.status_code == 200, verified.text
        assert verified.json()["verified_by"] == "key admin"
