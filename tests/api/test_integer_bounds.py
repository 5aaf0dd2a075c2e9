"""Integers past their bounds are refused naming the field (400 on seed 002's
``/api/v1``, 422 elsewhere) and change nothing, on SQLite and PostgreSQL; each bound
itself is answered. ``offset=2**64`` reached the database and was a 500 (SQLite:
"Python int too large to convert to SQLite INTEGER")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from claybot.api.bounds import INT64_MAX, MAX_OFFSET
from claybot.config.home import HomePaths
from claybot.server.app import create_app
from claybot.wire.bodies import MAX_PROVIDER_POSITION
from tests.conftest import ECHO_SETTINGS, engine_on_backend

PAST_64_BITS = 2**64
JOB_ID = "00000000-0000-4000-8000-000000000000"  # a job: made by the fixture


@pytest.fixture(params=["sqlite", "postgres"])
async def api(request: pytest.FixtureRequest, paths: HomePaths) -> AsyncIterator[httpx.AsyncClient]:
    """The owner's API on an engine that runs no job (a job stays as it was made)."""
    settings = {**ECHO_SETTINGS, "jobs": {"workers": 0}}
    async with engine_on_backend(request, paths, settings) as engine:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
            yield client


async def a_job(api: httpx.AsyncClient) -> str:
    created = await api.post("/api/v1/jobs", json={"task": "t"})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def refused(response: httpx.Response, field: str) -> None:
    """The answer to a value past a bound: the seed's 400 on /api/v1, else 422; the
    field named either way."""
    body: dict[str, Any] = response.json()
    if response.request.url.path.startswith("/api/v1/"):
        assert (response.status_code, body["code"]) == (400, "VALIDATION_ERROR"), body
        assert body["field"] == field, body
    else:
        assert response.status_code == 422, body
        assert body["error"]["field"] == field, body


@pytest.mark.parametrize("too_large", [PAST_64_BITS, INT64_MAX + 1, MAX_OFFSET + 1])
async def test_an_offset_past_its_bound_is_refused_naming_it(
    api: httpx.AsyncClient, too_large: int
) -> None:
    job_id = await a_job(api)
    for path in ("/api/v1/jobs", "/api/v1/agents", f"/api/v1/jobs/{job_id}/logs"):
        refused(await api.get(path, params={"offset": too_large}), "query.offset")
    assert (await api.get("/api/v1/jobs")).json()["count"] == 1  # nothing changed


async def test_an_offset_at_its_bound_is_an_empty_page(api: httpx.AsyncClient) -> None:
    job_id = await a_job(api)
    for path, items in (
        ("/api/v1/jobs", "jobs"),
        ("/api/v1/agents", "agents"),
        (f"/api/v1/jobs/{job_id}/logs", "logs"),
    ):
        page = await api.get(path, params={"offset": MAX_OFFSET})
        assert page.status_code == 200, page.text
        assert (page.json()[items], page.json()["offset"]) == ([], MAX_OFFSET)


async def test_a_log_line_id_past_64_bits_is_refused_and_the_largest_is_answered(
    api: httpx.AsyncClient,
) -> None:
    job_id = await a_job(api)
    logs = f"/api/v1/jobs/{job_id}/logs"
    refused(await api.get(logs, params={"after": PAST_64_BITS}), "query.after")
    refused(await api.get(logs, params={"after": INT64_MAX + 1}), "query.after")
    assert (await api.get(logs, params={"after": INT64_MAX})).json()["logs"] == []
    first = (await api.get(logs)).json()["logs"]
    assert [line["message"] for line in first] == ["Job created"]


async def test_history_record_numbers_past_64_bits_are_refused(api: httpx.AsyncClient) -> None:
    history = "/v1/engine/agents/someone/history"
    for name in ("before", "after"):
        refused(await api.get(history, params={name: PAST_64_BITS}), f"query.{name}")
        refused(await api.get(history, params={name: INT64_MAX + 1}), f"query.{name}")


async def test_a_provider_position_past_its_bound_is_refused(api: httpx.AsyncClient) -> None:
    before = (await api.get("/v1/engine/providers")).json()
    provider = {"id": "more", "type": "scripted", "model": "echo"}
    for position in (PAST_64_BITS, MAX_PROVIDER_POSITION + 1):
        response = await api.post("/v1/engine/providers", json={**provider, "position": position})
        refused(response, "body.position")
    assert (await api.get("/v1/engine/providers")).json() == before
    at_bound = await api.post(
        "/v1/engine/providers", json={**provider, "position": MAX_PROVIDER_POSITION}
    )
    assert at_bound.status_code == 200, at_bound.text
    assert [p["id"] for p in at_bound.json()["providers"]][-1] == "more"  # past the end: last
