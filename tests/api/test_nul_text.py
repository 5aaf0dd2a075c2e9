"""Text bound for the database with a NUL character in it is refused naming the field,
on SQLite and PostgreSQL alike, and nothing is stored. PostgreSQL's text cannot hold
NUL: it raised a driver error, answered as 503 ``UNAVAILABLE`` (the database being
fine), while SQLite stored the text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from claybot.server.app import create_app
from tests.conftest import ECHO_SETTINGS, engine_on_backend

SERVER = {"name": "s", "description": "a server here", "package_name": "pkg", "command": "c"}
NUL = "a\x00b"


@pytest.fixture(params=["sqlite", "postgres"])
async def api(request: pytest.FixtureRequest, paths: HomePaths) -> AsyncIterator[httpx.AsyncClient]:
    settings = {**ECHO_SETTINGS, "jobs": {"workers": 0}}
    async with engine_on_backend(request, paths, settings) as engine:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
            yield client


def refused(response: httpx.Response, field: str) -> None:
    body: dict[str, Any] = response.json()
    if response.request.url.path.startswith("/api/v1/"):  # seed 002's shape
        assert (response.status_code, body["code"], body["field"]) == (
            400,
            "VALIDATION_ERROR",
            field,
        ), body
    else:
        assert (response.status_code, body["error"]["field"]) == (422, field), body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"task": NUL}, "body.task"),
        ({"task": "t", "model": NUL}, "body.model"),
        ({"task": "t", "attachments": [NUL]}, "body.attachments.0"),
    ],
)
async def test_a_job_with_nul_is_refused(
    api: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    refused(await api.post("/api/v1/jobs", json=body), field)
    assert (await api.get("/api/v1/jobs")).json()["count"] == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": NUL}, "body.name"),
        ({"description": "a server \x00 here"}, "body.description"),
        ({"version": NUL}, "body.version"),
        ({"category": NUL}, "body.category"),
        ({"command": NUL}, "body.command"),
        ({"args": [NUL]}, "body.args.0"),
        ({"env": {"KEY": NUL}}, "body.env.KEY"),
        ({"env": {NUL: "v"}}, f"body.env.{NUL}.[key]"),
        ({"transport": "http", "command": None, "url": "http://x/\x00"}, "body.url"),
        ({"documentation": NUL}, "body.documentation"),
        ({"author": NUL}, "body.author"),
        ({"repository_url": NUL}, "body.repository_url"),
    ],
)
async def test_an_mcp_server_with_nul_is_refused(
    api: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    body = {key: value for key, value in {**SERVER, **change}.items() if value is not None}
    refused(await api.post("/api/v1/agents", json=body), field)
    assert (await api.get("/api/v1/agents")).json()["count"] == 0


async def test_an_answer_with_nul_is_refused(api: httpx.AsyncClient) -> None:
    job_id = (await api.post("/api/v1/jobs", json={"task": "t"})).json()["id"]
    respond = f"/api/v1/jobs/{job_id}/respond"
    refused(await api.post(respond, json={"answer": NUL}), "body.answer")
    edited = {"action": "edit", "answer": "a", "editedPlan": NUL}
    refused(await api.post(respond, json=edited), "body.editedPlan")


async def test_keys_and_uploads_with_nul_are_refused(api: httpx.AsyncClient) -> None:
    refused(await api.post("/api/v1/admin/keys", json={"name": NUL}), "body.name")
    engine_key = {"name": NUL, "scopes": ["jobs:read"]}
    refused(await api.post("/v1/engine/keys", json=engine_key), "body.name")
    refused(await api.delete("/api/v1/admin/keys/a%00b"), "path.key_id")
    refused(await api.post("/v1/engine/keys/a%00b/revoke"), "path.keyId")
    assert (await api.get("/api/v1/admin/keys")).json()["keys"] == []
    upload = {"file": ("a.txt", b"hi", "text/plain")}
    refused(await api.post("/api/v1/jobs/upload", files=upload, data={"jobId": NUL}), "body.jobId")
    typed = {"file": ("a.txt", b"hi", "text/pl\x00ain")}
    refused(await api.post("/api/v1/jobs/upload", files=typed), "file")
