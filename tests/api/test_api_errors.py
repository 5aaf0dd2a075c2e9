"""Error answers of the engine API, in-process against a started engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from claybot.agents.system import EngineStopping, MessageTooLarge
from claybot.api.body_limit import DEFAULT_MAX_BODY_BYTES
from claybot.api.errors import install_error_handlers
from claybot.config.store import ConfigError
from claybot.db.errors import StoreError
from claybot.kernel.errors import ClayError, Conflict, InvalidInput, NotFound
from claybot.plugin_api import PluginError
from claybot.plugin_api.errors import UnknownPlugin
from claybot.proactive.errors import AgentLimitReached
from claybot.scheduling.schedule import ScheduleError


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["ok"] is False
    error: dict[str, Any] = body["error"]
    assert error["code"] == code, error
    return error


async def test_a_chunked_body_over_the_limit_gets_413(api: httpx.AsyncClient) -> None:
    # No Content-Length: the size is only known while the body arrives.
    async def ten_megabytes() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * (1024 * 1024)

    response = await api.post(
        "/v1/engine/messages",
        content=ten_megabytes(),
        headers={"content-type": "application/json"},
    )
    assert "content-length" not in response.request.headers
    error = error_of(response, 413, "too_large")
    assert str(DEFAULT_MAX_BODY_BYTES) in error["message"]


async def test_a_chunked_body_under_the_limit_reaches_the_route(api: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"userId": "u", "channelId": "c", '
        yield b'"text": "' + b"y" * 1000 + b'"}'

    response = await api.post(
        "/v1/engine/messages", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 202, response.text


async def test_a_declared_length_over_the_limit_gets_413(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/engine/messages",
        content=b"x" * (DEFAULT_MAX_BODY_BYTES + 1),
        headers={"content-type": "application/json"},
    )
    error_of(response, 413, "too_large")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/v1/engine/status", "GET"),
        # Two routes share this path: both methods are listed, not just the first route's.
        ("PUT", "/v1/engine/providers", "GET, POST"),
        ("PATCH", "/v1/engine/cron/tasks/some-task", "DELETE"),
        ("TRACE", "/v1/engine/cron/tasks", "GET, POST"),
    ],
)
async def test_405_names_every_allowed_method(
    api: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await api.request(method, path)
    error_of(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allow


# -- the house error, mapped once ------------------------------------------------------


class LegacyPluginError(PluginError):
    """A plugin written before ClayError: it named the status ``http_status``."""

    code = "legacy"
    http_status = 418


HOUSE_ERRORS: list[tuple[Exception, int, dict[str, Any], str | None]] = [
    (ClayError("no", field="x"), 400, {"code": "bad_request", "message": "no", "field": "x"}, None),
    (NotFound("gone", code="thing_not_found"), 404, {"code": "thing_not_found", "message": "gone"},
     None),
    (Conflict("taken", field="id"), 409, {"code": "conflict", "message": "taken", "field": "id"},
     None),
    (InvalidInput("bad"), 422, {"code": "invalid_request", "message": "bad"}, None),
    (EngineStopping("the engine is shutting down"), 503,
     {"code": "stopping", "message": "the engine is shutting down"}, "1"),
    (StoreError("keys failed"), 503, {"code": "database_unavailable", "message": "keys failed"},
     "5"),
    (ConfigError(Path("/h/settings.json"), "not valid JSON"), 500,
     {"code": "config_invalid", "message": "/h/settings.json: not valid JSON"}, None),
    (MessageTooLarge("text is 9 bytes"), 413,
     {"code": "too_large", "message": "text is 9 bytes", "field": "text"}, None),
    (ScheduleError("unknown time zone 'X'", field="timezone"), 422,
     {"code": "invalid_request", "message": "unknown time zone 'X'", "field": "timezone"}, None),
    (UnknownPlugin("nope"), 404, {"code": "unknown_plugin",
     "message": "no plugin with id 'nope' is installed", "field": "pluginId"}, None),
    (LegacyPluginError("teapot"), 418, {"code": "legacy", "message": "teapot"}, None),
    (AgentLimitReached("at most 1"), 409, {"code": "too_many_agents", "message": "at most 1"},
     None),
]  # fmt: skip


@pytest.mark.parametrize(("error", "status", "detail", "retry_after"), HOUSE_ERRORS)
async def test_every_house_error_is_answered_by_the_one_handler(
    error: Exception, status: int, detail: dict[str, Any], retry_after: str | None
) -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fail")
    async def fail() -> None:
        raise error

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/fail")
    assert response.status_code == status
    assert response.json() == {"ok": False, "error": detail}
    assert response.headers.get("retry-after") == retry_after


async def test_an_unknown_cron_task_is_named_whole(api: httpx.AsyncClient) -> None:
    error = error_of(await api.post("/v1/engine/cron/tasks/nope/run"), 404, "task_not_found")
    assert error == {"code": "task_not_found", "message": "no cron task with id 'nope'",
                     "field": "taskId"}  # fmt: skip


async def test_a_blank_heartbeat_prompt_is_invalid_input_not_a_conflict(
    api: httpx.AsyncClient,
) -> None:
    response = await api.post("/v1/engine/heartbeat/tasks", json={"title": "T", "prompt": "  "})
    assert error_of(response, 422, "invalid_request")["field"] == "body.prompt"
    listing = (await api.get("/v1/engine/heartbeat/tasks")).json()
    assert listing["tasks"] == []  # nothing was written


async def test_a_cron_task_whose_prompt_is_only_blanks_is_refused_and_nothing_written(
    api: httpx.AsyncClient,
) -> None:
    # Found by the conformance suite: the prompt passed min_length, the TASK.md was
    # written, and reading it back (its prompt stripped) failed with a 500.
    body = {"name": "T", "schedule": "* * * * *", "prompt": " \n "}
    response = await api.post("/v1/engine/cron/tasks", json=body)
    assert error_of(response, 422, "invalid_request")["field"] == "body.prompt"
    assert (await api.get("/v1/engine/cron/tasks")).json()["tasks"] == []


async def test_a_schedule_error_names_the_body_field_it_came_from(api: httpx.AsyncClient) -> None:
    body = {"name": "T", "schedule": "0 9 * * *", "prompt": "p"}
    zone = await api.post("/v1/engine/cron/tasks", json={**body, "timezone": "Mars/Base"})
    assert error_of(zone, 422, "invalid_request")["field"] == "body.timezone"
    day = await api.post("/v1/engine/cron/tasks", json={**body, "schedule": "0 9 31 2 *"})
    assert error_of(day, 422, "invalid_request")["field"] == "body.schedule"


async def test_an_auth_entry_of_an_unknown_type_is_refused_without_echoing_it(
    api: httpx.AsyncClient,
) -> None:
    body = {"id": "openai", "key": "type", "value": "sk-not-a-type"}
    error = error_of(await api.post("/v1/engine/auth", json=body), 422, "invalid_request")
    assert error["field"] == "body.value" and "sk-not-a-type" not in error["message"]
    assert (await api.get("/v1/engine/auth")).json()["entries"] == {}  # nothing was written
