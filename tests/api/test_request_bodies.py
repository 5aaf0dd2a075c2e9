"""What request bodies and query strings accept, in-process against a started engine."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from claybot.cron import task
from claybot.db.keys import SCOPES
from claybot.engine.engine import Engine
from claybot.wire.bodies import Gate


def invalid(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "invalid_request"
    return error


def invalid_for_codeck(response: httpx.Response) -> dict[str, Any]:
    """A 422 on a path codeck's web client calls: ``error`` is the text it shows."""
    assert response.status_code == 422, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == "invalid_request" and isinstance(body["error"], str)
    return body


HEARTBEAT = {"title": "Inbox", "prompt": "check the inbox"}
CRON = {"name": "daily", "schedule": "0 9 * * *", "prompt": "report"}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/engine/heartbeat/tasks", {**HEARTBEAT, "overwrite": 0}, "body.overwrite"),
        ("/v1/engine/heartbeat/tasks", {**HEARTBEAT, "overwrite": "true"}, "body.overwrite"),
        ("/v1/engine/cron/tasks", {**CRON, "enabled": 1}, "body.enabled"),
        ("/v1/engine/cron/tasks", {**CRON, "deleteAfterRun": "no"}, "body.deleteAfterRun"),
        (
            "/v1/engine/cron/tasks",
            {**CRON, "gate": {"command": "true", "timeoutMs": "500"}},
            "body.gate.timeoutMs",
        ),
        ("/v1/engine/providers", {"id": "scripted", "enabled": 0}, "body.enabled"),
        ("/v1/engine/keys", {"name": "k", "scopes": ["admin"], "rateLimitRpm": "5"}, None),
    ],
)
async def test_bodies_take_json_types_strictly(
    api: httpx.AsyncClient, path: str, body: dict[str, Any], field: str | None
) -> None:
    error = invalid(await api.post(path, json=body))
    assert error["field"] == (field or "body.rateLimitRpm")


async def test_a_bad_heartbeat_gate_names_the_field(engine: Engine, api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/engine/heartbeat/tasks", json={**HEARTBEAT, "gate": {"timeoutMs": 500}}
    )
    error = invalid(response)
    assert error["field"] == "body.gate.command"
    # One line naming the field, not pydantic's multi-line report with its links.
    assert error["message"] == "body.gate.command: Field required"
    assert (await engine.heartbeat.listing())["tasks"] == []


async def test_a_heartbeat_gate_is_kept(api: httpx.AsyncClient) -> None:
    gate = {"command": "test -e /", "timeoutMs": 1000}
    response = await api.post("/v1/engine/heartbeat/tasks", json={**HEARTBEAT, "gate": gate})
    assert response.status_code == 201, response.text
    assert response.json()["task"]["gate"] == gate


async def test_an_unknown_scope_is_refused_with_the_scopes_listed(api: httpx.AsyncClient) -> None:
    error = invalid(await api.post("/v1/engine/keys", json={"name": "k", "scopes": ["root"]}))
    assert error["field"] == "scopes"
    assert "jobs:read" in error["message"] and "admin" in error["message"]
    spec = (await api.get("/openapi.json")).json()
    scopes = spec["components"]["schemas"]["CreateKey"]["properties"]["scopes"]
    assert set(scopes["items"]["enum"]) == SCOPES


async def test_a_provider_without_a_type_is_named_by_its_id(api: httpx.AsyncClient) -> None:
    added = await api.post("/v1/engine/providers", json={"id": "local"})
    assert added.status_code == 200, added.text
    assert {"id": "local", "enabled": True, "options": {}} in added.json()["providers"]
    # An id that is no type, with no type: refused with the types named, as documented.
    refused = await api.post("/v1/engine/providers", json={"id": "my-llm"})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("unknown_provider_type", "type")
    assert "openai" in error["message"]


AGENT = {"name": "digest", "objective": "summarise", "schedule": "0 0 1 1 *", "runner": "engine"}


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/engine/keys", {"name": "k", "scopes": ["admin"], "rateLimitRpm": 120.0}, 201),
        ("/v1/engine/providers", {"id": "scripted", "position": 0.0}, 200),
        (
            "/v1/engine/heartbeat/tasks",
            {**HEARTBEAT, "gate": {"command": "true", "timeoutMs": 5e3}},
            201,
        ),
        ("/api/agents", {**AGENT, "timeoutMs": 60000.0, "maxRetries": 2.0}, 201),
    ],
)
async def test_integers_may_be_written_as_json_numbers_with_no_fraction(
    api: httpx.AsyncClient, path: str, body: dict[str, Any], status: int
) -> None:
    # 5000.0 is the integer 5000 to JSON Schema (and what Python's json writes for a float).
    response = await api.post(path, json=body)
    assert response.status_code == status, response.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**AGENT, "timeoutMs": 60000.5}, "body.timeoutMs"),
        ({**AGENT, "timeoutMs": "60000"}, "body.timeoutMs"),
        ({**AGENT, "maxRetries": True}, "body.maxRetries"),
        ({**AGENT, "schedule": "0 0 30 2 *"}, "body.schedule"),
        ({**AGENT, "name": " \t"}, "body.name"),
    ],
)
async def test_a_proactive_agent_body_is_checked(
    api: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    assert invalid_for_codeck(await api.post("/api/agents", json=body))["field"] == field


async def test_a_proactive_edit_refuses_null(api: httpx.AsyncClient) -> None:
    created = await api.post("/api/agents", json=AGENT)
    assert created.status_code == 201, created.text
    agent_id = created.json()["agent"]["id"]
    error = invalid_for_codeck(await api.put(f"/api/agents/{agent_id}", json={"name": None}))
    assert error["field"] == "body.name"
    renamed = await api.put(f"/api/agents/{agent_id}", json={"name": "weekly", "model": None})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["agent"]["name"] == "weekly"


def test_the_api_gate_is_the_task_files_gate() -> None:
    assert Gate.model_json_schema()["properties"] == task.Gate.model_json_schema()["properties"]
