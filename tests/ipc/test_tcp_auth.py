"""The API-key middleware on a tiny inline app, and the rate limiter with a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from claybot.db.keys import MemoryApiKeyStore
from claybot.engine.ipc.ratelimit import SlidingWindowLimiter
from claybot.engine.ipc.tcp_auth import ApiKeyMiddleware, required_scope


async def whoami(request: Request) -> JSONResponse:
    return JSONResponse({"key": request.scope["state"]["api_key"].name})


async def stream(request: Request) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        for n in range(3):
            yield f"data: {n}\n\n".encode()

    return StreamingResponse(chunks(), media_type="text/event-stream")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _client(store: MemoryApiKeyStore, clock: Clock) -> httpx.AsyncClient:
    app = Starlette(
        routes=[
            Route("/v1/engine/status", whoami),
            Route("/v1/engine/events", stream),
            Route("/api/agents", whoami, methods=["GET", "POST"]),
        ]
    )
    wrapped = ApiKeyMiddleware(app, store, SlidingWindowLimiter(clock))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=wrapped), base_url="http://tcp")


async def test_keys_scopes_and_rates() -> None:
    store, clock = MemoryApiKeyStore(), Clock()
    _, admin = await store.create("admin", ["admin"], rate_limit_rpm=1000)
    _, reader = await store.create("reader", ["agents:read"], rate_limit_rpm=2)
    revoked, revoked_key = await store.create("old", ["admin"])
    await store.revoke(revoked.id)
    async with await _client(store, clock) as client:
        assert (await client.get("/v1/engine/status")).status_code == 401
        assert (
            await client.get("/v1/engine/status", headers={"Authorization": "Basic abc"})
        ).status_code == 401
        wrong = await client.get("/v1/engine/status", headers={"Authorization": "Bearer cb_wrong"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        assert "cb_wrong" not in wrong.text
        old = await client.get(
            "/v1/engine/status", headers={"Authorization": f"Bearer {revoked_key}"}
        )
        assert old.status_code == 401
        ok = await client.get("/v1/engine/status", headers={"Authorization": f"Bearer {admin}"})
        assert ok.status_code == 200 and ok.json() == {"key": "admin"}
        as_reader = {"Authorization": f"Bearer {reader}"}
        forbidden = await client.get("/v1/engine/status", headers=as_reader)
        assert forbidden.status_code == 403 and "admin" in forbidden.json()["error"]["message"]
        assert (await client.post("/api/agents", headers=as_reader)).status_code == 403
        # The reader has 2 requests a minute; the two 403s above counted nothing.
        assert (await client.get("/api/agents", headers=as_reader)).status_code == 200
        assert (await client.get("/api/agents", headers=as_reader)).status_code == 200
        limited = await client.get("/api/agents", headers=as_reader)
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) == 60
        clock.now += 59.5
        assert (await client.get("/api/agents", headers=as_reader)).headers["Retry-After"] == "1"
        clock.now += 1
        assert (await client.get("/api/agents", headers=as_reader)).status_code == 200


async def test_streaming_responses_pass_through_intact() -> None:
    store, clock = MemoryApiKeyStore(), Clock()
    _, admin = await store.create("admin", ["admin"])
    async with await _client(store, clock) as client:
        response = await client.get(
            "/v1/engine/events", headers={"Authorization": f"Bearer {admin}"}
        )
    assert response.status_code == 200
    assert response.text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"


def test_the_scope_table() -> None:
    assert required_scope("GET", "/v1/engine/status") == "admin"
    assert required_scope("GET", "/api/agents/abc") == "agents:read"
    assert required_scope("PATCH", "/api/agents/abc") == "agents:write"
    assert required_scope("GET", "/api/v1/jobs") == "jobs:read"
    assert required_scope("DELETE", "/api/v1/jobs/1") == "jobs:delete"
    assert required_scope("POST", "/api/v1/jobs/1/respond") == "jobs:write"
    assert required_scope("GET", "/openapi.json") is None
    assert required_scope("GET", "/anything-else") == "admin"
