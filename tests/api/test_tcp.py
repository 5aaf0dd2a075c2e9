"""The TCP listener of a real engine: API keys, scopes and rate limits, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from claybot.config.home import HomePaths
from tests.conftest import ECHO_SETTINGS, EngineProcess, write_settings

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, paths: HomePaths) -> Iterator[EngineProcess]:
    write_settings(paths, ECHO_SETTINGS)
    extra = {}
    if request.param == "postgres":
        # A database of its own: the test counts the keys in it.
        extra["CLAYBOT_DATABASE_URL"] = request.getfixturevalue("fresh_postgres_url")
    process = EngineProcess(paths, extra)
    process.start()
    yield process
    process.terminate()


def create_key(engine: EngineProcess, scopes: list[str], rpm: int = 600) -> str:
    with engine.client() as client:
        response = client.post(
            "/v1/engine/keys", json={"name": "test", "scopes": scopes, "rateLimitRpm": rpm}
        )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


def test_tcp_needs_a_valid_key_with_the_scope_and_within_its_rate(engine: EngineProcess) -> None:
    with engine.client() as client:
        port = client.get("/v1/engine/status").json()["tcp"]["port"]
    admin = create_key(engine, ["admin"])
    reader = create_key(engine, ["agents:read"])
    slow = create_key(engine, ["admin"], rpm=3)
    revoked = create_key(engine, ["admin"])
    with engine.client() as client:
        prefix = revoked[:12]
        assert client.post(f"/v1/engine/keys/{prefix}/revoke").json()["record"]["revoked"] is True
        listed = client.get("/v1/engine/keys").json()["keys"]
        assert len(listed) == 4 and all(admin not in str(k) for k in listed)

    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as tcp:

        def get(key: str | None, path: str = "/v1/engine/status") -> httpx.Response:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return tcp.get(path, headers=headers)

        assert get(None).status_code == 401
        assert get("cb_not-a-real-key").status_code == 401
        assert get(revoked).status_code == 401
        denied = get(reader)
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
        allowed = get(admin)
        assert allowed.status_code == 200 and allowed.json()["ok"] is True
        assert get(admin, "/openapi.json").status_code == 200
        assert [get(slow).status_code for _ in range(3)] == [200, 200, 200]
        limited = get(slow)
        assert limited.status_code == 429 and 1 <= int(limited.headers["Retry-After"]) <= 60
        # Posting a message over TCP with an admin key works like the socket.
        posted = tcp.post(
            "/v1/engine/messages",
            json={"userId": "tcp", "channelId": "c", "text": "over tcp"},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert posted.status_code == 202

    # Use is recorded after the response (off the request path): poll for it.
    deadline = time.monotonic() + 10
    while True:
        with engine.client() as client:
            keys = {k["prefix"]: k for k in client.get("/v1/engine/keys").json()["keys"]}
        if keys[admin[:12]]["usageCount"] >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert keys[admin[:12]]["usageCount"] >= 3
    assert keys[admin[:12]]["lastUsedAt"] is not None


def test_key_creation_rejects_bad_scopes(engine: EngineProcess) -> None:
    with engine.client() as client:
        response = client.post("/v1/engine/keys", json={"name": "x", "scopes": ["root"]})
        assert response.status_code == 422 and response.json()["error"]["field"] == "scopes"
        assert client.post("/v1/engine/keys/nope/revoke").status_code == 404


def test_unknown_keys_from_an_address_do_not_lock_its_valid_keys_out(
    engine: EngineProcess,
) -> None:
    """Behind a reverse proxy, or on localhost, every client has one address: one client
    sending wrong keys gets its failures refused, and the others' keys still work."""
    with engine.client() as client:
        port = client.get("/v1/engine/status").json()["tcp"]["port"]
    admin = create_key(engine, ["admin"])
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as tcp:

        def get(key: str, path: str = "/v1/engine/status") -> httpx.Response:
            return tcp.get(path, headers={"Authorization": f"Bearer {key}"})

        statuses = [get(f"cb_stale-key-{n}").status_code for n in range(25)]
        assert statuses == [401] * 20 + [429] * 5
        limited = get("cb_stale-key-0")
        assert limited.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
        assert get(admin).status_code == 200
        made_now = create_key(engine, ["jobs:read"])  # made while the address is limited
        assert get(made_now, "/api/v1/jobs").status_code == 200
        assert get("cb_stale-key-25").status_code == 429  # its failures are still limited
    assert engine.output().count("unknown API keys in a minute from 127.0.0.1") == 1
