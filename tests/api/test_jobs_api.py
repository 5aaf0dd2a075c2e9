"""Seed 002's job API through the HTTP doors, with the engine's own workers running the jobs
(a scripted model), on SQLite and PostgreSQL: plan approval, the respond texts, artifacts,
rejection, cancelling, the HITL modes; keys, scopes, ownership, uploads and bad input."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.config.home import HomePaths
from claybot.engine.engine import Engine
from claybot.server.app import create_app
from tests.conftest import engine_on_backend

PLAN = json.dumps({"type": "plan", "plan": "## Plan\n\n1. Write report.md", "question": "Go?"})


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


RULES = [
    {"match": "Task: plan", "response": call("ask_user", question=PLAN)},
    {"match": "[PLAN EDITED]", "response": call("ask_user", question=PLAN)},
    {
        "match": "[PLAN APPROVED]",
        "response": call("write_file", filename="report.md", content="# R\n"),
    },
    {"match": "Wrote report.md", "response": call("final_answer", answer="Report written.")},
    {"match": "[PLAN REJECTED]", "response": call("final_answer", answer="Not done, as asked.")},
    {"match": "Task: sleep", "response": call("run_python", code="import time; time.sleep(30)")},
    {"match": "Task: ask", "response": call("ask_user", question="Which colour?")},
    {"match": "blue", "response": call("final_answer", answer="Blue it is.")},
    {"match": "Task: quick", "response": call("final_answer", answer="Done at once.")},
]
SETTINGS = {"providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}]}


@pytest.fixture(params=["sqlite", "postgres"])
async def engine(request: pytest.FixtureRequest, paths: HomePaths) -> AsyncIterator[Engine]:
    async with engine_on_backend(request, paths, SETTINGS) as engine:
        yield engine


@pytest.fixture
async def owner(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    """The Unix socket's view: the owner, no key."""
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
        yield client


@pytest.fixture
def tcp(engine: Engine) -> Callable[[str | None], httpx.AsyncClient]:
    """A client of the TCP listener presenting ``key`` (or none)."""
    app = ApiKeyMiddleware(create_app(engine), engine.keys)

    def client(key: str | None, header: str = "authorization") -> httpx.AsyncClient:
        headers = {}
        if key is not None:
            headers = {header: f"Bearer {key}" if header == "authorization" else key}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://claybot", headers=headers
        )

    return client


async def make_key(engine: Engine, *scopes: str, rpm: int = 10_000) -> str:
    _, key = await engine.keys.create("test", list(scopes), rpm)
    return key


async def until(client: httpx.AsyncClient, job_id: str, *statuses: str) -> dict[str, Any]:
    async with asyncio.timeout(20):
        while True:
            job: dict[str, Any] = (await client.get(f"/api/v1/jobs/{job_id}")).json()
            if job["status"] in statuses:
                return job
            await asyncio.sleep(0.05)


async def create(client: httpx.AsyncClient, task: str, **extra: Any) -> str:
    response = await client.post("/api/v1/jobs", json={"task": task, **extra})
    assert response.status_code == 201, response.text
    assert set(response.json()) == {"id", "status", "task", "created_at"}
    return str(response.json()["id"])


async def test_plan_approval_edit_approve_artifact_and_result(
    owner: httpx.AsyncClient,
) -> None:
    job_id = await create(owner, "plan a report")
    waiting = await until(owner, job_id, "waiting_for_user")
    assert json.loads(waiting["agent_question"])["type"] == "plan"
    edited = await owner.post(
        f"/api/v1/jobs/{job_id}/respond",
        json={"action": "edit", "editedPlan": "## Plan v2", "answer": ""},
    )
    assert edited.status_code == 200, edited.text
    assert edited.json() == {
        "id": job_id,
        "status": "queued",
        "message": (
            "[PLAN EDITED] User modified the plan:\n\n## Plan v2\n\nAdditional feedback: None"
        ),
    }
    await until(owner, job_id, "waiting_for_user")
    approved = await owner.post(f"/api/v1/jobs/{job_id}/respond", json={"action": "approve"})
    assert approved.json()["message"] == "[PLAN APPROVED] User approved the plan."
    done = await until(owner, job_id, "completed", "failed")
    assert (done["status"], done["result"]) == ("completed", "Report written.")
    [artifact] = done["artifacts"]
    assert artifact["filename"] == "report.md"
    download = await owner.get(artifact["url"])
    assert download.content == b"# R\n"
    assert 'filename="report.md"' in download.headers["content-disposition"]
    logs = (await owner.get(f"/api/v1/jobs/{job_id}/logs")).json()["logs"]
    assert logs[0]["message"] == "Job created" and logs[-1]["message"] == "Job completed"


async def test_reject_respond_and_the_exact_texts(owner: httpx.AsyncClient) -> None:
    job_id = await create(owner, "plan something")
    await until(owner, job_id, "waiting_for_user")
    empty = await owner.post(f"/api/v1/jobs/{job_id}/respond", json={"action": "reject"})
    assert empty.status_code == 400 and empty.json()["code"] == "VALIDATION_ERROR"
    rejected = await owner.post(
        f"/api/v1/jobs/{job_id}/respond", json={"action": "reject", "answer": "not now"}
    )
    assert rejected.json()["message"] == "[PLAN REJECTED] not now"
    done = await until(owner, job_id, "completed")
    assert done["result"] == "Not done, as asked." and done["artifacts"] == []
    again = await owner.post(f"/api/v1/jobs/{job_id}/respond", json={"answer": "hello"})
    assert (again.status_code, again.json()["code"]) == (400, "INVALID_STATE")

    asked = await create(owner, "ask me", hitl_mode="always_ask")
    assert (await until(owner, asked, "waiting_for_user"))["agent_question"] == "Which colour?"
    plain = await owner.post(f"/api/v1/jobs/{asked}/respond", json={"answer": "blue"})
    assert plain.json()["message"] == "blue"
    assert (await until(owner, asked, "completed"))["result"] == "Blue it is."


async def test_auto_execute_runs_through_and_cancel_stops_a_running_job(
    owner: httpx.AsyncClient,
) -> None:
    quick = await create(owner, "quick one", hitl_mode="auto_execute")
    assert (await until(owner, quick, "completed"))["result"] == "Done at once."
    slow = await create(owner, "sleep a while", hitl_mode="auto_execute")
    await until(owner, slow, "running")
    cancelled = await owner.post(f"/api/v1/jobs/{slow}/cancel")
    assert cancelled.status_code == 200
    async with asyncio.timeout(10):  # "within seconds"
        assert (await until(owner, slow, "cancelled"))["status"] == "cancelled"
    gone = await owner.delete(f"/api/v1/jobs/{slow}")
    assert (gone.status_code, gone.json()["code"]) == (400, "INVALID_STATE")


ROUTES: list[tuple[str, str, str | None]] = [
    # method, path ({job} is a job of the key's own), the scope it needs (None: no key)
    ("GET", "/api/v1/health", None),
    ("POST", "/api/v1/jobs", "jobs:write"),
    ("GET", "/api/v1/jobs", "jobs:read"),
    ("GET", "/api/v1/jobs/{job}", "jobs:read"),
    ("POST", "/api/v1/jobs/{job}/respond", "jobs:write"),
    ("POST", "/api/v1/jobs/{job}/cancel", "jobs:write"),
    ("DELETE", "/api/v1/jobs/{job}", "jobs:delete"),
    ("GET", "/api/v1/jobs/{job}/logs", "jobs:read"),
    ("GET", "/api/v1/jobs/{job}/artifacts", "jobs:read"),
    ("POST", "/api/v1/jobs/upload", "jobs:write"),
    ("GET", "/api/v1/admin/keys", "admin"),
    ("POST", "/api/v1/admin/keys", "admin"),
    ("GET", "/api/v1/admin/workers", "admin"),
    ("GET", "/api/v1/admin/metrics", "admin"),
    ("GET", "/api/v1/jobs/{job}/artifacts/{unknown}", "jobs:read"),
    ("DELETE", "/api/v1/admin/keys/{unknown}", "admin"),
    ("GET", "/api/v1/agents", "agents:read"),
    ("POST", "/api/v1/agents", "agents:write"),
    ("POST", "/api/v1/agents/discover", "agents:read"),
    ("POST", "/api/v1/admin/agents/{unknown}/verify", "admin"),
]
SCOPES = [
    "jobs:read",
    "jobs:write",
    "jobs:delete",
    "agents:read",
    "agents:write",
    "metrics",
    "chat",
    "admin",
]


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
async def test_every_route_with_every_scope_and_without_a_key(
    engine: Engine, tcp: Callable[..., httpx.AsyncClient]
) -> None:
    for scope in [None, *SCOPES]:
        key = await make_key(engine, scope) if scope else None
        async with tcp(key) as client:
            for method, path, needed in ROUTES:
                job_id = None
                if "{job}" in path:
                    async with tcp(await make_key(engine, "jobs:write", "jobs:read")) as maker:
                        job_id = await create(maker, "quick job", hitl_mode="auto_execute")
                url = path.replace("{job}", str(job_id)).replace("{unknown}", str(uuid.uuid4()))
                kwargs: dict[str, Any] = {}
                if method == "POST" and url.endswith("/jobs"):
                    kwargs["json"] = {"task": "quick"}
                elif url.endswith("/upload"):
                    kwargs["files"] = {"file": ("a.txt", b"hi", "text/plain")}
                elif url.endswith("/admin/keys") and method == "POST":
                    kwargs["json"] = {"name": "made"}
                elif url.endswith("/respond"):
                    kwargs["json"] = {"answer": "x"}
                elif url.endswith("/agents") and method == "POST":
                    kwargs["json"] = {
                        "name": "echo",
                        "description": "A server that echoes",
                        "package_name": f"pkg-{uuid.uuid4().hex}",
                        "command": "echo",
                    }
                elif url.endswith("/discover"):
                    kwargs["json"] = {"task": "echo"}
                response = await client.request(method, url, **kwargs)
                if needed is None:
                    expected = {200}
                elif key is None:
                    expected = {401}
                elif scope in (needed, "admin"):
                    # Allowed: the route runs (another key's job is 404, a finished one 400).
                    expected = {200, 201, 400, 404}
                else:
                    expected = {403}
                assert response.status_code in expected, (scope, method, url, response.text)
                if response.status_code in (401, 403):
                    assert set(response.json()) == {"error", "code"}
                    assert response.json()["code"] in ("UNAUTHORIZED", "FORBIDDEN")


def test_the_scope_matrix_lists_every_seed_route() -> None:
    """A route added under /api/v1 without a row in ROUTES fails here."""
    from claybot.api.jobs import admin_routes as job_admin_routes
    from claybot.api.jobs import registry_routes
    from claybot.api.jobs import routes as job_routes

    served = {
        (method, re.sub(r"\{[^}]+\}", "{}", route.path))
        for router in (job_routes.router, job_admin_routes.router, registry_routes.router)
        for route in router.routes
        for method in getattr(route, "methods", ())
    }
    listed = {(method, re.sub(r"\{[^}]+\}", "{}", path)) for method, path, _ in ROUTES}
    assert served == listed


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
async def test_a_key_sees_only_its_own_jobs_and_x_api_key_works(
    engine: Engine, tcp: Callable[..., httpx.AsyncClient]
) -> None:
    mine = await make_key(engine, "jobs:read", "jobs:write", "jobs:delete")
    theirs = await make_key(engine, "jobs:read", "jobs:write", "jobs:delete")
    async with tcp(mine, "x-api-key") as me, tcp(theirs) as them:
        job_id = await create(me, "plan it")
        assert (await me.get(f"/api/v1/jobs/{job_id}")).status_code == 200
        for method, path in [
            ("GET", f"/api/v1/jobs/{job_id}"),
            ("GET", f"/api/v1/jobs/{job_id}/logs"),
            ("GET", f"/api/v1/jobs/{job_id}/artifacts"),
            ("POST", f"/api/v1/jobs/{job_id}/cancel"),
            ("DELETE", f"/api/v1/jobs/{job_id}"),
        ]:
            response = await them.request(method, path)
            assert (response.status_code, response.json()["code"]) == (404, "NOT_FOUND")
        assert (await them.get("/api/v1/jobs")).json()["count"] == 0
        # An upload onto another key's job is refused, and nothing is stored.
        refused = await them.post(
            "/api/v1/jobs/upload",
            data={"jobId": job_id},
            files={"file": ("x.txt", b"intruder", "text/plain")},
        )
        assert refused.status_code == 404
        db = await engine.jobs.database()
        assert await db.files.attachments(job_id) == []
        ok = await me.post(
            "/api/v1/jobs/upload",
            data={"jobId": job_id},
            files={"file": ("../../etc/pass wd", b"mine", "text/plain")},
        )
        assert ok.status_code == 201 and ok.json()["filename"] == "pass_wd"
        assert [f.filename for f in await db.files.attachments(job_id)] == ["pass_wd"]


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
async def test_rate_limit_and_size_cap_answer_in_the_seeds_shape(
    engine: Engine, tcp: Callable[..., httpx.AsyncClient]
) -> None:
    key = await make_key(engine, "jobs:read", "jobs:write", rpm=3)
    async with tcp(key) as client:
        codes = [(await client.get("/api/v1/jobs")).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = await client.get("/api/v1/jobs")
        assert limited.json()["code"] == "RATE_LIMITED" and int(limited.headers["retry-after"]) >= 1
    big = await make_key(engine, "jobs:write")
    cap = engine.settings.jobs.max_file_bytes
    async with tcp(big) as client:
        response = await client.post(
            "/api/v1/jobs/upload", files={"file": ("big.bin", b"x" * (cap + 1), None)}
        )
        assert (response.status_code, response.json()["code"]) == (413, "FILE_TOO_LARGE")


async def test_an_upload_whose_content_type_is_too_long_is_refused_naming_the_file(
    owner: httpx.AsyncClient,
) -> None:
    too_long = "text/" + "x" * 196  # 201 characters; PostgreSQL's column holds 200
    response = await owner.post("/api/v1/jobs/upload", files={"file": ("a.txt", b"hi", too_long)})
    assert response.status_code == 400, response.text
    assert (response.json()["code"], response.json()["field"]) == ("VALIDATION_ERROR", "file")
    at_most = "text/" + "x" * 195
    stored = await owner.post("/api/v1/jobs/upload", files={"file": ("a.txt", b"hi", at_most)})
    assert stored.status_code == 201, stored.text


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"task": ""},
        {"task": "x" * 10_001},
        {"task": "t", "priority": 101},
        {"task": "t", "timeout_seconds": 5},
        {"task": "t", "hitl_mode": "yolo"},
        {"task": "t", "surprise": True},
        [1, 2, 3],
        "garbage",
    ],
)
async def test_garbage_is_a_validation_error_never_a_crash(
    owner: httpx.AsyncClient, body: Any
) -> None:
    response = await owner.post("/api/v1/jobs", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert (await owner.get("/api/v1/jobs")).json()["count"] == 0
    broken = await owner.post(
        "/api/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400
