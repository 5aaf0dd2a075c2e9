"""Every seed-000 endpoint through the real Unix socket of a running engine, bad input included."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from tests.conftest import ECHO_SETTINGS, EngineProcess, write_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    home = Path(f"/tmp/cb-api-{os.getpid()}")
    subprocess.run(["rm", "-rf", str(home)], check=False)
    paths = HomePaths(home)
    write_settings(paths, ECHO_SETTINGS)
    process = EngineProcess(paths)
    process.start()
    yield process
    process.terminate()
    subprocess.run(["rm", "-rf", str(home)], check=False)


@pytest.fixture
def client(engine: EngineProcess) -> Iterator[httpx.Client]:
    with engine.client() as client:
        yield client


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["ok"] is False
    error: dict[str, Any] = body["error"]
    assert error["code"] and error["message"]
    return error


def post_and_wait(client: httpx.Client, text: str, user: str = "api") -> dict[str, Any]:
    posted = client.post(
        "/v1/engine/messages", json={"userId": user, "channelId": "c", "text": text}
    )
    assert posted.status_code == 202, posted.text
    body: dict[str, Any] = posted.json()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        records = client.get(f"/v1/engine/agents/{body['agentId']}/history").json()["records"]
        if any(
            r["type"] == "assistant_message" and r["messageId"] == body["messageId"]
            for r in records
        ):
            return body
        time.sleep(0.01)
    raise AssertionError("no reply")


def test_the_socket_is_private(engine: EngineProcess) -> None:
    mode = stat.S_IMODE(engine.paths.socket.stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(engine.paths.home.stat().st_mode) == 0o700


def test_status_names_every_entity(client: httpx.Client) -> None:
    body = client.get("/v1/engine/status").json()
    assert body["ok"] is True
    for key in ("plugins", "connectors", "providers", "inferenceProviders", "imageProviders"):
        assert isinstance(body[key], list), key
    assert {"id", "pluginId", "name", "loadedAt"} <= set(body["connectors"][0])
    assert body["connectors"][0]["id"] == "local"
    # Seed 000's pluginId is a string for every connector, the engine's own too.
    assert {(c["id"], c["pluginId"]) for c in body["connectors"]} == {
        ("local", "builtin"),
        ("webchat", "builtin"),
    }
    assert body["inferenceProviders"] == [
        {"id": "scripted", "name": "scripted", "label": "Scripted (echo)", "model": "echo"}
    ]
    # name and label mean the same in both provider lists.
    assert body["providers"] == [
        {
            "id": "scripted",
            "name": "scripted",
            "label": "Scripted (echo)",
            "type": "scripted",
            "enabled": True,
            "model": "echo",
        }
    ]
    assert isinstance(body["tcp"]["port"], int)


def test_cron_and_heartbeat_lists_start_empty(client: httpx.Client) -> None:
    assert client.get("/v1/engine/cron/tasks").json() == {"ok": True, "tasks": [], "problems": []}
    heartbeat = client.get("/v1/engine/heartbeat/tasks").json()
    assert heartbeat["tasks"] == [] and heartbeat["problems"] == []


def test_agents_history_reset_and_background(client: httpx.Client) -> None:
    posted = post_and_wait(client, "hello socket")
    agents = client.get("/v1/engine/agents").json()["agents"]
    mine = next(a for a in agents if a["agentId"] == posted["agentId"])
    assert mine["descriptor"] == {
        "type": "user",
        "connector": "local",
        "userId": "api",
        "channelId": "c",
    }
    history = client.get(
        f"/v1/engine/agents/{posted['agentId']}/history", params={"limit": 2}
    ).json()
    assert [r["type"] for r in history["records"]] == ["user_message", "assistant_message"]
    assert history["records"][1]["text"] == "echo: hello socket"
    reset = client.post(
        f"/v1/engine/agents/{posted['agentId']}/reset", json={"message": "fresh start"}
    )
    assert reset.status_code == 200 and reset.json()["status"] == "done"
    last = client.get(f"/v1/engine/agents/{posted['agentId']}/history", params={"limit": 1}).json()
    assert last["records"][0]["type"] == "reset" and last["records"][0]["message"] == "fresh start"
    assert client.get("/v1/engine/agents/background").json() == {"ok": True, "agents": []}


def test_plugins_load_list_and_unload(engine: EngineProcess, client: httpx.Client) -> None:
    loaded = client.post(
        "/v1/engine/plugins/load",
        json={"pluginId": "clock", "settings": {"timezone": "Europe/Paris"}},
    )
    assert loaded.status_code == 200, loaded.text
    assert loaded.json()["plugin"]["id"] == "clock"
    listing = client.get("/v1/engine/plugins").json()
    assert [p["id"] for p in listing["loaded"]] == ["clock"]
    assert any(entry["id"] == "clock" for entry in listing["catalog"])
    assert "current_time" in client.get("/v1/engine/status").json()["tools"]
    settings = json.loads(engine.paths.settings.read_text())
    assert (
        settings["plugins"][0]["instanceId"] == "clock"
        and settings["plugins"][0]["enabled"] is True
    )
    assert client.post("/v1/engine/plugins/unload", json={"instanceId": "clock"}).status_code == 200
    assert client.get("/v1/engine/plugins").json()["loaded"] == []
    assert json.loads(engine.paths.settings.read_text())["plugins"][0]["enabled"] is False


def test_auth_set_writes_0600_and_never_echoes_the_secret(
    engine: EngineProcess, client: httpx.Client
) -> None:
    secret = "sk-test-very-secret-value"
    with client.stream("GET", "/v1/engine/events", params={"since": 0}) as stream:
        response = client.post(
            "/v1/engine/auth", json={"id": "openai", "key": "apiKey", "value": secret}
        )
        assert response.status_code == 200
        assert secret not in response.text
        seen = False
        for line in stream.iter_lines():
            assert secret not in line
            if '"auth.updated"' in line:
                seen = True
                break
        assert seen, "no auth.updated event"
    assert stat.S_IMODE(engine.paths.auth.stat().st_mode) == 0o600
    assert json.loads(engine.paths.auth.read_text())["openai"]["apiKey"] == secret
    assert secret not in client.get("/v1/engine/status").text


def is_reply_to_after_init(event: dict[str, Any]) -> bool:
    return (
        event["type"] == "agent.outgoing"
        and event["payload"]["message"]["text"] == "echo: after init"
    )


def test_events_open_with_init_and_replay_after_last_event_id(client: httpx.Client) -> None:
    post_and_wait(client, "for the log")
    with client.stream("GET", "/v1/engine/events") as stream:
        lines = (line for line in stream.iter_lines() if line.startswith("data:"))
        init = json.loads(next(lines)[5:])
        assert init["type"] == "init"
        assert {"status", "cron", "heartbeat", "backgroundAgents"} <= set(init["payload"])
        last_id = init["id"]
        post_and_wait(client, "after init")
        # The reply is in history a moment before its event is published: wait for the
        # event itself, so the replay below has it to replay.
        while not is_reply_to_after_init(json.loads(next(lines)[5:])):
            pass
    seen: list[dict[str, Any]] = []
    with client.stream(
        "GET", "/v1/engine/events", headers={"Last-Event-ID": str(last_id)}
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
                # The reply to the first post may come after init: wait for this one.
                if any(is_reply_to_after_init(e) for e in seen[1:]):
                    break
    assert seen[0]["type"] == "init" and seen[0]["payload"]["replayed"] >= 1
    replayed = seen[1:]
    assert all(e["id"] > last_id for e in replayed)
    assert [e["id"] for e in replayed] == sorted(e["id"] for e in replayed)
    assert any(is_reply_to_after_init(e) for e in replayed)


def test_message_idempotent_retry(client: httpx.Client) -> None:
    body = {"userId": "idem", "channelId": "c", "text": "once", "messageId": "client-42"}
    first = client.post("/v1/engine/messages", json=body).json()
    second = client.post("/v1/engine/messages", json=body).json()
    assert first["messageId"] == second["messageId"] == "client-42"
    assert (first["duplicate"], second["duplicate"]) == (False, True)


BAD_REQUESTS: list[tuple[str, str, Any, int, str, str | None]] = [
    # method, path, body (bytes = raw), status, error code, field
    ("POST", "/v1/engine/messages", b"{not json", 400, "malformed_json", None),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": 5, "channelId": "c", "text": "x"},
        422,
        "invalid_request",
        "body.userId",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u", "channelId": "c"},
        422,
        "invalid_request",
        "body.text",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u", "channelId": "c", "text": ""},
        422,
        "invalid_request",
        "body.text",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u/../x", "channelId": "c", "text": "x"},
        422,
        "invalid_request",
        "body.userId",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u", "channelId": "c", "text": "x", "extra": 1},
        422,
        "invalid_request",
        "body.extra",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u", "channelId": "c", "text": "x", "connector": "telegram"},
        422,
        "invalid_request",
        "body.connector",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u", "channelId": "c", "text": "x", "messageId": "a#b"},
        422,
        "invalid_request",
        "body.messageId",
    ),
    (
        "POST",
        "/v1/engine/messages",
        {"userId": "u", "channelId": "c", "text": "x" * 70_000},
        413,
        "too_large",
        "text",
    ),
    ("POST", "/v1/engine/messages", b"[" + b"1," * 600_000 + b"1]", 413, "too_large", None),
    ("POST", "/v1/engine/messages", [1, 2], 422, "invalid_request", "body"),
    ("GET", "/v1/engine/agents/does-not-exist/history", None, 404, "agent_not_found", "agentId"),
    ("GET", "/v1/engine/agents/x/history?limit=0", None, 422, "invalid_request", "query.limit"),
    ("GET", "/v1/engine/agents/x/history?limit=abc", None, 422, "invalid_request", "query.limit"),
    ("POST", "/v1/engine/agents/does-not-exist/reset", None, 404, "agent_not_found", "agentId"),
    (
        "POST",
        "/v1/engine/plugins/load",
        {"pluginId": "no-such-plugin"},
        404,
        "unknown_plugin",
        None,
    ),
    (
        "POST",
        "/v1/engine/plugins/load",
        {"pluginId": "clock", "settings": {"timezone": "Mars/Olympus"}},
        400,
        "invalid_settings",
        None,
    ),
    ("POST", "/v1/engine/plugins/load", {"settings": {}}, 422, "invalid_request", "body.pluginId"),
    (
        "POST",
        "/v1/engine/plugins/load",
        {"pluginId": "clock", "instanceId": "../etc"},
        400,
        "invalid_instance_id",
        None,
    ),
    (
        "POST",
        "/v1/engine/plugins/unload",
        {"instanceId": "never-loaded"},
        404,
        "instance_not_found",
        None,
    ),
    ("POST", "/v1/engine/plugins/unload", {}, 422, "invalid_request", "body.instanceId"),
    (
        "POST",
        "/v1/engine/auth",
        {"id": "openai", "key": "apiKey"},
        422,
        "invalid_request",
        "body.value",
    ),
    (
        "POST",
        "/v1/engine/auth",
        {"id": "../x", "key": "apiKey", "value": "v"},
        422,
        "invalid_request",
        "body.id",
    ),
    ("GET", "/v1/engine/events", {"Last-Event-ID": "abc"}, 400, "invalid_request", "Last-Event-ID"),
    (
        "POST",
        "/v1/engine/webchat/messages",
        {"userId": "w", "text": ""},
        422,
        "invalid_request",
        "body.text",
    ),
    (
        "POST",
        "/v1/engine/webchat/messages",
        {"userId": "a/b", "text": "x"},
        422,
        "invalid_request",
        "body.userId",
    ),
    (
        "POST",
        "/v1/engine/webchat/messages",
        {"text": "x", "connector": "local"},
        422,
        "invalid_request",
        None,
    ),
    ("POST", "/v1/engine/webchat/messages", b"\xff\xfe", 400, "malformed_json", None),
    (
        "POST",
        "/v1/engine/permissions/nope",
        {"decision": "allow"},
        404,
        "request_not_found",
        "requestId",
    ),
    (
        "POST",
        "/v1/engine/permissions/nope",
        {"decision": "yes"},
        422,
        "invalid_request",
        "body.decision",
    ),
    ("POST", "/v1/engine/permissions/nope", [], 422, "invalid_request", None),
    ("GET", "/v1/engine/nothing-here", None, 404, "not_found", None),
    ("DELETE", "/v1/engine/status", None, 405, "method_not_allowed", None),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code", "field"), BAD_REQUESTS)
def test_bad_requests_get_a_clear_4xx_and_change_nothing(
    engine: EngineProcess,
    client: httpx.Client,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str,
    field: str | None,
) -> None:
    settings_before = engine.paths.settings.read_bytes()
    agents_before = client.get("/v1/engine/agents").json()["agents"]
    if path == "/v1/engine/events":
        response = client.request(method, path, headers=body)
    elif isinstance(body, bytes):
        response = client.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
    else:
        response = client.request(method, path, json=body)
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code
    if field is not None:
        assert error.get("field") == field
    assert engine.paths.settings.read_bytes() == settings_before
    assert len(client.get("/v1/engine/agents").json()["agents"]) == len(agents_before)
    assert client.get("/v1/engine/status").status_code == 200  # the engine is still fine


def test_openapi_describes_every_route(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    for route in (
        "/v1/engine/status",
        "/v1/engine/cron/tasks",
        "/v1/engine/heartbeat/tasks",
        "/v1/engine/agents",
        "/v1/engine/agents/background",
        "/v1/engine/agents/{agentId}/history",
        "/v1/engine/agents/{agentId}/reset",
        "/v1/engine/plugins",
        "/v1/engine/plugins/load",
        "/v1/engine/plugins/unload",
        "/v1/engine/auth",
        "/v1/engine/events",
        "/v1/engine/messages",
        "/v1/engine/permissions",
        "/v1/engine/permissions/{requestId}",
        "/v1/engine/webchat/messages",
        "/v1/engine/webchat/events",
    ):
        assert route in paths, route


def webchat_frames(stream: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in stream.iter_lines():
        if line.startswith("data:"):
            yield json.loads(line[5:])


def test_webchat_posts_and_streams_one_conversation(client: httpx.Client) -> None:
    with client.stream("GET", "/v1/engine/webchat/events", params={"userId": "bob"}) as stream:
        frames = webchat_frames(stream)
        init = next(frames)
        assert init["type"] == "init" and init["payload"]["pendingPermissions"] == []
        for user in ("ann", "bob"):
            posted = client.post(
                "/v1/engine/webchat/messages",
                json={"userId": user, "text": f"hi from {user}", "messageId": f"w-{user}"},
            )
            assert posted.status_code == 202 and posted.json()["duplicate"] is False
        reply = next(frames)  # ann's reply was filtered out of bob's stream
    assert reply["type"] == "agent.outgoing"
    message = reply["payload"]["message"]
    assert (message["connector"], message["userId"], message["channelId"]) == (
        "webchat",
        "bob",
        "web",
    )
    assert message["text"] == "echo: hi from bob"
    again = client.post(
        "/v1/engine/webchat/messages",
        json={"userId": "bob", "text": "hi from bob", "messageId": "w-bob"},
    )
    assert again.json()["duplicate"] is True
