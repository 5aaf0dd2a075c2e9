"""Error answers of the engine API, in-process against a started engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from claybot.api.body_limit import DEFAULT_MAX_BODY_BYTES


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
        ("PATCH", "/api/agents/some-agent", "GET, PUT, DELETE"),
        ("TRACE", "/v1/engine/cron/tasks", "GET, POST"),
    ],
)
async def test_405_names_every_allowed_method(
    api: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await api.request(method, path)
    error_of(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allow
