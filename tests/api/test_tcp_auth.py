"""The API-key middleware around a tiny inline app, called in-process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from claybot.api.ratelimit import FailureLimiter, SlidingWindowLimiter
from claybot.api.tcp_auth import ApiKeyMiddleware, required_scope
from claybot.db.errors import StoreError
from claybot.db.keys import ApiKeyRecord, MemoryApiKeyStore


async def whoami(request: Request) -> JSONResponse:
    record: ApiKeyRecord = request.scope["state"]["api_key"]
    return JSONResponse({"key": record.name, "scopes": list(record.scopes)})


async def stream(request: Request) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        for n in range(3):
            yield f"id: {n}\ndata: {n}\n\n".encode()

    return StreamingResponse(chunks(), media_type="text/event-stream")


APP = Starlette(
    routes=[
        Route("/v1/engine/status", whoami),
        Route("/v1/engine/events", stream),
        Route("/api/agents", whoami, methods=["GET", "POST"]),
        Route("/api/v1/jobs", whoami, methods=["GET", "POST"]),
        Route("/api/v1/jobs/{id}", whoami, methods=["GET", "DELETE"]),
        Route("/openapi.json", whoami),
        Route("/v1/chat/completions", whoami, methods=["POST"]),
        Route("/v1/models", whoami),
        Route("/v1/models/{model}", whoami),
    ]
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Setup:
    def __init__(self) -> None:
        self.store = MemoryApiKeyStore()
        self.clock = Clock()
        self.middleware = ApiKeyMiddleware(APP, self.store, SlidingWindowLimiter(self.clock))

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.middleware)
        return httpx.AsyncClient(transport=transport, base_url="http://tcp")

    async def key(self, scopes: Iterable[str], rpm: int = 1000, name: str = "k") -> str:
        _, plaintext = await self.store.create(name, scopes, rate_limit_rpm=rpm)
        return plaintext


@pytest.fixture
def setup() -> Setup:
    return Setup()


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body == {"ok": False, "error": {"code": code, "message": body["error"]["message"]}}
    message: str = body["error"]["message"]
    return message


def assert_codeck_error(response: httpx.Response, status: int, code: str) -> str:
    """An error on a path codeck's web client calls, in the shape it reads (``error``: text)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body == {"ok": False, "error": body["error"], "code": code}
    message: str = body["error"]
    return message


async def test_no_key_is_unauthorized(setup: Setup) -> None:
    async with setup.client() as client:
        response = await client.get("/v1/engine/status")
    assert "Bearer" in assert_error(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "cb_abc", "Token cb_abc", "Bearer cb_a cb_b"],
)
async def test_a_malformed_header_is_unauthorized(setup: Setup, header: str) -> None:
    await setup.key(["admin"])
    async with setup.client() as client:
        response = await client.get("/v1/engine/status", headers={"Authorization": header})
    assert_error(response, 401, "unauthorized")


async def test_a_wrong_key_is_unauthorized_and_never_echoed(setup: Setup) -> None:
    real = await setup.key(["admin"])
    async with setup.client() as client:
        for wrong in ("cb_wrong-key-value", real[:-1], real + "x", "sk-someone-elses"):
            response = await client.get("/v1/engine/status", headers=bearer(wrong))
            assert_error(response, 401, "unauthorized")
            assert wrong not in response.text and real[3:12] not in response.text


async def test_a_revoked_key_is_unauthorized(setup: Setup) -> None:
    record, plaintext = await setup.store.create("old", ["admin"])
    async with setup.client() as client:
        assert (await client.get("/v1/engine/status", headers=bearer(plaintext))).is_success
        await setup.store.revoke(record.prefix)
        response = await client.get("/v1/engine/status", headers=bearer(plaintext))
    assert_error(response, 401, "unauthorized")


async def test_a_key_without_the_routes_scope_is_forbidden(setup: Setup) -> None:
    reader = await setup.key(["agents:read", "jobs:read"])
    async with setup.client() as client:
        engine = await client.get("/v1/engine/status", headers=bearer(reader))
        assert "'admin'" in assert_error(engine, 403, "forbidden")
        write = await client.post("/api/agents", headers=bearer(reader))
        assert "'agents:write'" in assert_codeck_error(write, 403, "forbidden")
        delete = await client.delete("/api/v1/jobs/1", headers=bearer(reader))
        assert delete.status_code == 403  # in seed 002's shape, on its paths
        assert delete.json() == {"error": delete.json()["error"], "code": "FORBIDDEN"}
        assert "'jobs:delete'" in delete.json()["error"]
        assert (await client.get("/api/agents", headers=bearer(reader))).status_code == 200
        assert (await client.get("/api/v1/jobs/1", headers=bearer(reader))).status_code == 200


async def test_each_scope_opens_its_routes(setup: Setup) -> None:
    writer = await setup.key(["jobs:write"])
    deleter = await setup.key(["jobs:delete"])
    async with setup.client() as client:
        assert (await client.post("/api/v1/jobs", headers=bearer(writer))).status_code == 200
        assert (await client.get("/api/v1/jobs", headers=bearer(writer))).status_code == 403
        assert (await client.delete("/api/v1/jobs/1", headers=bearer(deleter))).status_code == 200
        assert (await client.post("/api/v1/jobs", headers=bearer(deleter))).status_code == 403


async def test_an_admin_key_passes_every_check_and_reaches_the_app(setup: Setup) -> None:
    admin = await setup.key(["admin"], name="root")
    async with setup.client() as client:
        for method, path in [
            ("GET", "/v1/engine/status"),
            ("POST", "/api/agents"),
            ("GET", "/api/v1/jobs"),
            ("DELETE", "/api/v1/jobs/1"),
        ]:
            response = await client.request(method, path, headers=bearer(admin))
            assert response.status_code == 200, (method, path)
            assert response.json() == {"key": "root", "scopes": ["admin"]}


async def test_the_api_description_needs_a_key_but_no_scope(setup: Setup) -> None:
    someone = await setup.key(["jobs:read"])
    async with setup.client() as client:
        assert (await client.get("/openapi.json")).status_code == 401
        assert (await client.get("/openapi.json", headers=bearer(someone))).status_code == 200


async def test_past_its_rate_a_key_gets_429_with_retry_after(setup: Setup) -> None:
    slow = await setup.key(["agents:read"], rpm=2)
    other = await setup.key(["agents:read"], rpm=2)
    async with setup.client() as client:
        # Refused requests (403) do not use up the rate.
        assert (await client.post("/api/agents", headers=bearer(slow))).status_code == 403
        assert (await client.get("/api/agents", headers=bearer(slow))).status_code == 200
        setup.clock.now += 10
        assert (await client.get("/api/agents", headers=bearer(slow))).status_code == 200
        limited = await client.get("/api/agents", headers=bearer(slow))
        assert "2 requests per minute" in assert_codeck_error(limited, 429, "rate_limited")
        assert limited.headers["Retry-After"] == "50"
        assert limited.headers["X-RateLimit-Limit"] == "2"
        assert limited.headers["X-RateLimit-Remaining"] == "0"
        assert (await client.get("/api/agents", headers=bearer(other))).status_code == 200
        setup.clock.now += 49.5
        assert (await client.get("/api/agents", headers=bearer(slow))).headers["Retry-After"] == "1"
        setup.clock.now += 0.5
        assert (await client.get("/api/agents", headers=bearer(slow))).status_code == 200


def assert_openai_error(response: httpx.Response, status: int, code: str, kind: str) -> str:
    """An error of the OpenAI-compatible door, in OpenAI's shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error == {"message": error["message"], "type": kind, "param": None, "code": code}
    message: str = error["message"]
    return message


async def test_the_chat_scope_opens_the_openai_door_which_answers_in_openais_shape(
    setup: Setup,
) -> None:
    chatter = await setup.key(["chat"], rpm=2)
    reader = await setup.key(["agents:read", "agents:write", "jobs:write"])
    admin = await setup.key(["admin"])
    async with setup.client() as client:
        assert (await client.post("/v1/chat/completions", headers=bearer(chatter))).is_success
        assert (await client.get("/v1/models/claybot", headers=bearer(admin))).is_success
        missing = await client.get("/v1/models")
        assert_openai_error(missing, 401, "unauthorized", "authentication_error")
        assert missing.headers["WWW-Authenticate"].startswith("Bearer")
        forbidden = await client.post("/v1/chat/completions", headers=bearer(reader))
        message = assert_openai_error(forbidden, 403, "forbidden", "permission_error")
        assert "'chat'" in message
        # chat opens nothing else, and the engine's paths keep the engine's shape.
        engine = await client.get("/v1/engine/status", headers=bearer(chatter))
        assert assert_error(engine, 403, "forbidden")
        assert (await client.get("/v1/models", headers=bearer(chatter))).is_success
        limited = await client.get("/v1/models", headers=bearer(chatter))
        assert_openai_error(limited, 429, "rate_limited", "rate_limit_error")
        assert limited.headers["Retry-After"]


async def test_allowed_requests_are_counted_on_the_key(setup: Setup) -> None:
    record, plaintext = await setup.store.create("counted", ["agents:read"])
    async with setup.client() as client:
        for _ in range(3):
            await client.get("/api/agents", headers=bearer(plaintext))
        await client.post("/api/agents", headers=bearer(plaintext))  # 403: not a use
    await asyncio.sleep(0)  # uses are recorded off the request path
    updated = await setup.store.get(record.id)
    assert updated is not None and updated.usage_count == 3 and updated.last_used_at is not None


class BrokenStore(MemoryApiKeyStore):
    def __init__(self, fail_verify: bool) -> None:
        super().__init__()
        self.fail_verify = fail_verify

    async def verify(self, plaintext: str) -> ApiKeyRecord | None:
        if self.fail_verify:
            raise StoreError("checking an API key failed: db.internal:5432 refused")
        return await super().verify(plaintext)

    async def record_use(self, key_id: str) -> None:
        raise StoreError("recording API key use failed: disk full")


async def test_a_database_outage_is_503_without_its_details() -> None:
    middleware = ApiKeyMiddleware(APP, BrokenStore(fail_verify=True), SlidingWindowLimiter())
    transport = httpx.ASGITransport(app=middleware)
    async with httpx.AsyncClient(transport=transport, base_url="http://tcp") as client:
        response = await client.get("/v1/engine/status", headers=bearer("cb_x"))
    assert_error(response, 503, "unavailable")
    assert "db.internal" not in response.text and response.headers["Retry-After"] == "5"


async def test_failing_to_record_use_does_not_fail_the_request() -> None:
    store = BrokenStore(fail_verify=False)
    _, admin = await store.create("a", ["admin"])
    middleware = ApiKeyMiddleware(APP, store, SlidingWindowLimiter())
    transport = httpx.ASGITransport(app=middleware)
    async with httpx.AsyncClient(transport=transport, base_url="http://tcp") as client:
        assert (await client.get("/v1/engine/status", headers=bearer(admin))).status_code == 200
    await asyncio.sleep(0)


async def test_a_streaming_response_passes_through_intact(setup: Setup) -> None:
    admin = await setup.key(["admin"])
    async with setup.client() as client:
        response = await client.get("/v1/engine/events", headers=bearer(admin))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == "id: 0\ndata: 0\n\nid: 1\ndata: 1\n\nid: 2\ndata: 2\n\n"


class CountingStore(MemoryApiKeyStore):
    """Counts the lookups a request costs (a database query on the real store)."""

    def __init__(self) -> None:
        super().__init__()
        self.verified = 0

    async def verify(self, plaintext: str) -> ApiKeyRecord | None:
        self.verified += 1
        return await super().verify(plaintext)


class Guessing:
    """Clients at two addresses in front of a middleware that allows 3 unknown keys a minute."""

    def __init__(self) -> None:
        self.store = CountingStore()
        self.clock = Clock()
        self.middleware = ApiKeyMiddleware(
            APP,
            self.store,
            SlidingWindowLimiter(self.clock),
            failures=FailureLimiter(3, self.clock),
        )

    def client(self, address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.middleware, client=(address, 50000))
        return httpx.AsyncClient(transport=transport, base_url="http://tcp")


async def test_a_guessing_client_gets_429_without_lookups_and_its_valid_keys_get_in() -> None:
    guessing = Guessing()
    _, valid = await guessing.store.create("owner", ["admin"])
    revoked_record, revoked = await guessing.store.create("old", ["admin"])
    await guessing.store.revoke(revoked_record.id)
    async with guessing.client("10.0.0.1") as shared, guessing.client("10.0.0.2") as other:
        for n in range(3):
            response = await shared.get("/v1/engine/status", headers=bearer(f"cb_guess{n}"))
            assert_error(response, 401, "unauthorized")
            guessing.clock.now += 10
        assert guessing.store.verified == 3
        # Past the limit every unknown key is refused, and the store is not asked.
        for n, key in enumerate(["cb_guess3", *(f"cb_more{n}" for n in range(100))]):
            limited = await shared.get("/v1/engine/status", headers=bearer(key))
            assert "unknown API keys" in assert_error(limited, 429, "rate_limited")
            # When the next failure would be within the limit: refused guesses count
            # too (the oldest of the newest three goes), so a guesser stays limited.
            assert limited.headers["Retry-After"] == {0: "40", 1: "50"}.get(n, "60")
            assert key not in limited.text
        assert guessing.store.verified == 3
        # A valid key from that address gets in, and so does one made just now.
        assert (await shared.get("/v1/engine/status", headers=bearer(valid))).status_code == 200
        _, new = await guessing.store.create("new", ["admin"])
        assert (await shared.get("/v1/engine/status", headers=bearer(new))).status_code == 200
        assert guessing.store.verified == 5
        # A revoked key may be live as far as memory knows: looked up, and refused.
        limited = await shared.get("/v1/engine/status", headers=bearer(revoked))
        assert_error(limited, 429, "rate_limited")
        assert guessing.store.verified == 6
        # Another address is not affected: its valid key works, its wrong key is a 401.
        assert (await other.get("/v1/engine/status", headers=bearer(valid))).status_code == 200
        wrong = await other.get("/v1/engine/status", headers=bearer("cb_typo"))
        assert_error(wrong, 401, "unauthorized")
        assert guessing.store.verified == 8
        # Once its failures are a minute old, a wrong key is a 401 again (looked up).
        guessing.clock.now += 60
        again = await shared.get("/v1/engine/status", headers=bearer("cb_guess4"))
        assert_error(again, 401, "unauthorized")
        assert guessing.store.verified == 9


async def test_successes_neither_count_nor_reset_the_failures() -> None:
    guessing = Guessing()
    _, valid = await guessing.store.create("owner", ["admin"])
    async with guessing.client("10.0.0.1") as client:

        async def status(key: str | None) -> int:
            headers = bearer(key) if key else {}
            return (await client.get("/v1/engine/status", headers=headers)).status_code

        assert [await status(valid) for _ in range(50)] == [200] * 50
        # Requests without a key cost no lookup and are not counted.
        assert [await status(None) for _ in range(10)] == [401] * 10
        # A valid key between failures buys no extra tries, and is let in past the limit.
        keys = ("cb_a", valid, "cb_b", valid, "cb_c", valid, "cb_d", valid)
        assert [await status(key) for key in keys] == [401, 200, 401, 200, 401, 200, 429, 200]
    assert guessing.store.verified == 50 + 7  # all but cb_d, refused from memory


def http_scope(path: str, key: str | None, scope_type: str = "http") -> Scope:
    headers = [(b"authorization", f"Bearer {key}".encode())] if key else []
    return {
        "type": scope_type,
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http" if scope_type == "http" else "ws",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 7331),
        "extensions": {},
    }


async def test_each_event_reaches_the_client_before_the_next_is_made(setup: Setup) -> None:
    """What SSE needs: nothing is buffered. BaseHTTPMiddleware would fail this."""
    produced = asyncio.Event()
    delivered = asyncio.Event()

    async def events(request: Request) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"data: first\n\n"
            produced.set()
            await asyncio.wait_for(delivered.wait(), 5)  # the client has the first event
            yield b"data: second\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/engine/events", events)])
    middleware = ApiKeyMiddleware(app, setup.store, SlidingWindowLimiter(setup.clock))
    admin = await setup.key(["admin"])
    sent: list[Message] = []

    async def receive() -> Message:
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body") == b"data: first\n\n":
            delivered.set()

    await asyncio.wait_for(middleware(http_scope("/v1/engine/events", admin), receive, send), 5)
    assert produced.is_set()
    bodies = [m.get("body") for m in sent if m["type"] == "http.response.body"]
    assert bodies[:2] == [b"data: first\n\n", b"data: second\n\n"]


async def run_websocket(middleware: ApiKeyMiddleware, scope: Scope) -> list[Message]:
    sent: list[Message] = []
    inbox = [{"type": "websocket.connect"}]

    async def receive() -> Message:
        if inbox:
            return inbox.pop()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(message: Message) -> None:
        sent.append(message)

    await middleware(scope, receive, send)
    return sent


async def echo_socket(scope: Scope, receive: Receive, send: Send) -> None:
    assert scope["state"]["api_key"].name == "k"
    await receive()
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": 1000})


async def test_websockets_need_a_key_too(setup: Setup) -> None:
    middleware = ApiKeyMiddleware(echo_socket, setup.store, SlidingWindowLimiter(setup.clock))
    admin = await setup.key(["admin"])
    reader = await setup.key(["agents:read"])

    refused = await run_websocket(middleware, http_scope("/v1/engine/ws", None, "websocket"))
    assert refused == [{"type": "websocket.close", "code": 4401, "reason": "unauthorized"}]
    forbidden = await run_websocket(middleware, http_scope("/v1/engine/ws", reader, "websocket"))
    assert forbidden[0]["code"] == 4403

    # A server that can answer the handshake with HTTP gets the JSON error.
    scope = http_scope("/v1/engine/ws", None, "websocket")
    scope["extensions"] = {"websocket.http.response": {}}
    answered = await run_websocket(middleware, scope)
    assert answered[0]["type"] == "websocket.http.response.start"
    assert answered[0]["status"] == 401
    assert b'"unauthorized"' in answered[1]["body"]

    accepted = await run_websocket(middleware, http_scope("/v1/engine/ws", admin, "websocket"))
    assert [m["type"] for m in accepted] == ["websocket.accept", "websocket.close"]


def websocket_with_query(path: str, query: bytes, key: str | None = None) -> Scope:
    scope = http_scope(path, key, "websocket")
    scope["query_string"] = query
    return scope


async def test_a_websocket_may_bring_its_key_in_the_query_which_is_taken_out(
    setup: Setup,
) -> None:
    """codeck's ws.ts: ``/?token=<encodeURIComponent(token)>``, since a browser cannot set a
    header on a WebSocket. The token leaves the scope the server logs the handshake from."""
    middleware = ApiKeyMiddleware(echo_socket, setup.store, SlidingWindowLimiter(setup.clock))
    reader = await setup.key(["agents:read"])
    quoted = reader.replace("_", "%5F").encode()  # percent-encoded, as a browser may
    scope = websocket_with_query("/", b"a=1&token=" + quoted + b"&b=%20")
    accepted = await run_websocket(middleware, scope)
    assert [m["type"] for m in accepted] == ["websocket.accept", "websocket.close"]
    assert scope["query_string"] == b"a=1&b=%20"
    assert reader.encode() not in repr(scope).encode() and quoted not in repr(scope).encode()

    agents = websocket_with_query("/api/agents/ws", b"token=" + reader.encode())
    assert (await run_websocket(middleware, agents))[0]["type"] == "websocket.accept"
    assert agents["query_string"] == b""


async def test_a_query_token_is_only_a_websockets_and_only_without_a_header(
    setup: Setup,
) -> None:
    middleware = ApiKeyMiddleware(echo_socket, setup.store, SlidingWindowLimiter(setup.clock))
    reader = await setup.key(["agents:read"])
    jobs = await setup.key(["jobs:read"])
    # A header, even a wrong one, is what is checked: the query is only a fallback.
    wrong_header = websocket_with_query("/", b"token=" + reader.encode(), "cb_not-a-key")
    refused = await run_websocket(middleware, wrong_header)
    assert refused == [{"type": "websocket.close", "code": 4401, "reason": "unauthorized"}]
    assert wrong_header["query_string"] == b""  # taken out all the same
    # The scope is the route's: codeck's WebSocket reads agents.
    forbidden = await run_websocket(
        middleware, websocket_with_query("/", b"token=" + jobs.encode())
    )
    assert forbidden[0]["code"] == 4403
    for query in (b"token=", b"token=cb_a%20cb_b", b"tokens=" + reader.encode()):
        refused = await run_websocket(middleware, websocket_with_query("/", query))
        assert refused[0]["code"] == 4401, query
    # Plain HTTP never takes a key from the query string.
    async with setup.client() as client:
        response = await client.get("/api/agents", params={"token": reader})
    assert_codeck_error(response, 401, "unauthorized")


async def test_lifespan_passes_straight_through(setup: Setup) -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    middleware = ApiKeyMiddleware(app, setup.store)

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    async def send(message: Message) -> None:
        raise AssertionError(message)

    await middleware({"type": "lifespan"}, receive, send)
    assert seen == ["lifespan"]


async def test_the_scope_table_can_be_replaced(setup: Setup) -> None:
    middleware = ApiKeyMiddleware(
        APP, setup.store, SlidingWindowLimiter(setup.clock), required_scope=lambda m, p: None
    )
    reader = await setup.key(["jobs:read"])
    transport = httpx.ASGITransport(app=middleware)
    async with httpx.AsyncClient(transport=transport, base_url="http://tcp") as client:
        assert (await client.get("/v1/engine/status", headers=bearer(reader))).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("GET", "/v1/engine/status", "admin"),
        ("POST", "/v1/engine/keys", "admin"),
        ("GET", "/api/agents", "agents:read"),
        ("HEAD", "/api/agents/abc", "agents:read"),
        ("PATCH", "/api/agents/abc", "agents:write"),
        ("POST", "/api/agents", "agents:write"),
        ("GET", "/api/v1/jobs", "jobs:read"),
        ("GET", "/api/v1/jobs/1/logs", "jobs:read"),
        ("DELETE", "/api/v1/jobs/1", "jobs:delete"),
        ("POST", "/api/v1/jobs", "jobs:write"),
        ("POST", "/api/v1/jobs/1/respond", "jobs:write"),
        ("POST", "/v1/chat/completions", "chat"),
        ("GET", "/v1/models", "chat"),
        ("GET", "/v1/models/agent:abc", "chat"),
        ("GET", "/openapi.json", None),
        ("GET", "/docs", None),
        ("GET", "/metrics", "metrics"),
        ("GET", "/metrics/x", "admin"),
        # Look-alikes and anything unlisted need admin: new routes start closed.
        ("GET", "/api/agentsx", "admin"),
        ("GET", "/api/v1/jobsearch", "admin"),
        ("GET", "/openapi.json/x", "admin"),
        ("GET", "/v1/engine", "admin"),
        ("GET", "/v1/modelsx", "admin"),
        ("POST", "/v1/chat/completions/x", "admin"),
        ("POST", "/v1/embeddings", "admin"),
        ("GET", "/", "admin"),
        ("WEBSOCKET", "/", "agents:read"),  # codeck's WebSocket; HTTP / is the dashboard's
        ("WEBSOCKET", "/api/agents/ws", "agents:read"),
        ("WEBSOCKET", "/v1/engine/ws", "admin"),
        ("GET", "/anything-else", "admin"),
    ],
)
def test_the_scope_table(method: str, path: str, scope: str | None) -> None:
    assert required_scope(method, path) == scope
