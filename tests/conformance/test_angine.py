"""Angine (seed 002; ``Mootbing/Angine`` at ff59681): every call its clients make, sent as
they send it to a real engine over TCP, and each answer read as they read it.

The clients: the dashboard's pages (``src/app/(dashboard)/dashboard/**/page.tsx``), which
send ``Authorization: Bearer <localStorage.engine_api_key>`` on every call; the worker
(``worker/index.ts``), whose one call to the API is the tool search (the rest of it goes
to the database, which ClayBot's own workers replace); and the two scripts under
``scripts/``, which read answers with ``grep`` (so a field's first occurrence in the raw
JSON matters). ClayBot's equivalents of the scripts (``scripts/angine/``) run here too.

One engine for the module (``claybot start`` on a free port) with a model behind a fake
OpenAI-compatible server on loopback that answers as Angine's plan-approval prompt leads
a model: a plan first; once it is approved (or answered), a file and the final answer.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess, write_settings
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent.parent
SCRIPTS = ROOT / "scripts" / "angine"
ECHO_SERVER = str(ROOT / "tests" / "plugins" / "mcp_echo_server.py")
PLAN = {"type": "plan", "plan": "## Proposed Plan\n\n1. Write result.txt", "question": "Proceed?"}
JOB_STATUSES = {"queued", "running", "completed", "failed", "waiting_for_user", "cancelled"}
# The scopes of the key Angine's home page made for its user (page.tsx:65).
DASHBOARD_SCOPES = ["jobs:read", "jobs:write", "agents:read", "admin"]
WAIT_S = 30.0


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


class AngineModel(FakeOpenAI):
    """A model that follows Angine's plan-approval prompt, by the conversation's last
    message: the task gets a plan (``ask_user``); a rejection ends the job; any other
    answer to the plan gets ``result.txt`` written; a written file, the final answer."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)

    async def handle(self, request: Request) -> Response:
        body = json.loads(await request.body())
        last = body["messages"][-1]
        said = _text(last)
        call = f"call-{next(self._ids)}"
        if last["role"] != "tool":
            self.reply_tool_calls((call, "ask_user", {"question": json.dumps(PLAN)}))
        elif said.startswith("[PLAN REJECTED]"):
            self.reply_tool_calls((call, "final_answer", {"answer": "Not done, as asked."}))
        elif said.startswith("Wrote "):
            self.reply_tool_calls((call, "final_answer", {"answer": "Done: result.txt holds 55."}))
        else:
            content = {"filename": "result.txt", "content": "55\n"}
            self.reply_tool_calls((call, "write_file", content))
        return await super().handle(request)  # which sends what was just scripted

    def conversation_of(self, task: str) -> list[dict[str, Any]]:
        """The messages of the first request of the job whose task is ``task``."""
        for recorded in self.requests:
            messages: list[dict[str, Any]] = recorded.body["messages"]
            if any(_text(m).startswith(f"Task: {task}") for m in messages):
                return messages
        raise AssertionError(f"the model was never asked about {task!r}")


@dataclass
class Angine:
    """The engine Angine's clients talk to, and what the module set up on it."""

    process: EngineProcess
    base_url: str
    key: str  # localStorage.engine_api_key: a key with the home page's scopes
    model: AngineModel
    server_id: str  # a verified MCP server (the registry's echo server)
    unverified_id: str

    def browser(self, key: str | None = None) -> httpx.Client:
        """The dashboard's fetch: relative paths, the key as a Bearer token."""
        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {key or self.key}"},
            timeout=WAIT_S,
        )


@pytest.fixture(scope="module")
def angine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Angine]:
    home = Path(f"/tmp/cb-angine-{os.getpid()}-{tmp_path_factory.mktemp('a').name[-8:]}")
    home.mkdir(parents=True, exist_ok=True)
    paths = HomePaths(home)
    model = AngineModel()
    with LoopbackServer(model):
        settings = {
            "providers": [{"id": "openai", "model": "gpt-fake", "options": {"maxRetries": 0}}],
            "jobs": {"workers": 2},
        }
        write_settings(paths, settings)
        env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": model.api_base}
        process = EngineProcess(paths, env)
        try:
            process.start()  # in here: an engine that answers too late is stopped too
            with process.client() as owner:
                port = owner.get("/v1/engine/status").json()["tcp"]["port"]
                # The tests poll faster than a page, and far more often than 60 a minute.
                made = owner.post(
                    "/v1/engine/keys",
                    json={"name": "dashboard", "scopes": DASHBOARD_SCOPES, "rateLimitRpm": 100_000},
                )
                assert made.status_code == 201, made.text
                key = made.json()["key"]
                echo = {
                    "name": "echo",
                    "description": "Shouts text in capitals and adds numbers",
                    "package_name": "@claybot-tests/echo",
                    "category": "text",
                    "command": sys.executable,
                    "args": [ECHO_SERVER],
                }
                server = owner.post("/api/v1/agents", json=echo).json()
                verified = owner.post(f"/api/v1/admin/agents/{server['id']}/verify")
                assert verified.status_code == 200, verified.text
                pending = owner.post(
                    "/api/v1/agents",
                    json={
                        "name": "weather",
                        "description": "Forecasts for a city, by the hour",
                        "package_name": "weather-mcp",
                        "command": "weather-mcp",
                    },
                ).json()
            yield Angine(
                process=process,
                base_url=f"http://127.0.0.1:{port}",
                key=key,
                model=model,
                server_id=server["id"],
                unverified_id=pending["id"],
            )
        finally:
            process.terminate()
            subprocess.run(["rm", "-rf", str(home)], check=False)


# -- helpers ---------------------------------------------------------------------------


def until(client: httpx.Client, job_id: str, *statuses: str) -> dict[str, Any]:
    """The job once its status is one of ``statuses`` (read as the pages poll it)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        job: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        assert time.monotonic() < deadline, f"job {job_id} stayed {job['status']!r}"
        time.sleep(0.05)


def submit(client: httpx.Client, task: str, **extra: Any) -> str:
    """A job as the playground submits it (apis/page.tsx:202)."""
    body = {
        "task": task,
        "model": "anthropic/claude-sonnet-4",
        "timeout_seconds": 300,
        "hitl_mode": "plan_approval",
        **extra,
    }
    created = client.post("/api/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job_id: str = created.json()["id"]
    return job_id


def waiting_plan(client: httpx.Client, task: str) -> str:
    """A job waiting for its plan to be approved: its id."""
    job_id = submit(client, task)
    job = until(client, job_id, "waiting_for_user")
    question = json.loads(job["agent_question"])  # the page's parseAgentMessage
    assert question["type"] == "plan" and isinstance(question["plan"], str)
    return job_id


def iso(value: Any) -> datetime:
    """What ``new Date(value)`` reads: an ISO 8601 string."""
    assert isinstance(value, str), value
    return datetime.fromisoformat(value)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def grep_first(field: str, raw: str) -> str:
    """What the scripts take with ``grep -o '"<field>":"[^"]*"' | head -1 | cut -d'"' -f4``."""
    found = re.search(rf'"{field}":"([^"]*)"', raw)
    return found.group(1) if found else ""


def error_text(response: httpx.Response) -> str:
    """What every page shows of a refusal: ``data.error``, a string (else "[object
    Object]" would be shown)."""
    assert not response.is_success
    error = response.json()["error"]
    assert isinstance(error, str) and error
    return error


# -- the dashboard: home page ---------------------------------------------------------


def test_home_page_key_comes_from_the_owner_not_from_the_database(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/page.tsx:60`: the home page inserted a key with admin
    into the ``api_keys`` table itself, through the browser's Supabase client (every
    table was open to it). ClayBot has no such door: the owner makes the key with
    ``claybot keys create`` (or the dashboard's keys page) and it goes into
    ``localStorage.engine_api_key``, which the pages then send as they did."""
    made = subprocess.run(
        [sys.executable, "-m", "claybot", "keys", "create", "--name", "angine dashboard"]
        + [arg for scope in DASHBOARD_SCOPES for arg in ("--scope", scope)],
        env=angine.process.env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    key = made.stdout.strip()
    with angine.browser(key) as browser:
        assert browser.get("/api/v1/admin/metrics").status_code == 200
    with httpx.Client(base_url=angine.base_url) as anonymous:
        refused = anonymous.post("/api/v1/admin/keys", json={"name": "from a browser"})
    assert refused.status_code == 401
    assert isinstance(refused.json()["error"], str)


def test_home_page_reads_the_metrics(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/page.tsx:90`: ``GET /api/v1/admin/metrics``; it shows
    ``jobs.total``, ``jobs.by_status.<status> || 0``, ``workers.total``,
    ``workers.by_status.<status> || 0``, ``agents.total`` and ``.verified`` (and their
    difference), ``api_keys.total`` and ``.active`` (and their difference)."""
    with angine.browser() as browser:
        answer = browser.get("/api/v1/admin/metrics")
    assert answer.status_code == 200
    metrics = answer.json()
    jobs, workers = metrics["jobs"], metrics["workers"]
    for status in ("queued", "running", "completed", "failed", "waiting_for_user"):
        assert is_int(jobs["by_status"][status])
    assert is_int(jobs["total"]) and jobs["total"] == sum(jobs["by_status"].values())
    assert is_int(jobs["last_hour"]["created"]) and is_int(jobs["last_hour"]["completed"])
    for status in ("active", "draining", "dead"):
        assert is_int(workers["by_status"][status])
    assert workers["by_status"]["active"] >= 1  # the engine's own worker
    assert workers["total"] == sum(workers["by_status"].values())
    assert is_int(metrics["agents"]["total"]) and is_int(metrics["agents"]["verified"])
    assert metrics["agents"]["verified"] >= 1 and metrics["agents"]["total"] >= 2
    assert is_int(metrics["api_keys"]["total"]) and is_int(metrics["api_keys"]["active"])
    assert 1 <= metrics["api_keys"]["active"] <= metrics["api_keys"]["total"]


# -- the dashboard: keys page -------------------------------------------------------------


def read_key(key: dict[str, Any]) -> None:
    """Each field of a key the keys page and the playground read, with its type."""
    assert isinstance(key["id"], str) and isinstance(key["name"], str)
    assert isinstance(key["key_prefix"], str) and key["key_prefix"]
    assert key["owner_email"] is None or isinstance(key["owner_email"], str)
    assert isinstance(key["scopes"], list) and all(isinstance(s, str) for s in key["scopes"])
    assert is_int(key["rate_limit_rpm"]) and is_int(key["total_requests"])  # .toLocaleString()
    assert isinstance(key["is_active"], bool)
    iso(key["created_at"])
    if key["last_used_at"] is not None:
        iso(key["last_used_at"])


def test_keys_page_lists_every_key_revoked_ones_too(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/keys/page.tsx:79`: ``GET
    /api/v1/admin/keys?active_only=false``; it maps ``data.keys`` and reads each key's
    ``name``, ``owner_email``, ``key_prefix``, ``scopes`` (``slice``, ``map``,
    ``length``), ``total_requests.toLocaleString()``, ``rate_limit_rpm``,
    ``last_used_at``, ``is_active`` and ``id``."""
    with angine.browser() as browser:
        made = browser.post("/api/v1/admin/keys", json={"name": "to revoke"}).json()
        assert browser.delete(f"/api/v1/admin/keys/{made['id']}").is_success
        answer = browser.get("/api/v1/admin/keys?active_only=false")
    assert answer.status_code == 200
    keys = answer.json()["keys"]
    for key in keys:
        read_key(key)
    by_id = {key["id"]: key for key in keys}
    assert by_id[made["id"]]["is_active"] is False
    dashboard = next(key for key in keys if angine.key.startswith(key["key_prefix"]))
    assert dashboard["is_active"] is True
    assert angine.key not in answer.text  # only the prefix is ever shown


def test_keys_page_revokes_a_key(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/keys/page.tsx:107`: ``DELETE
    /api/v1/admin/keys/<id>``, no body; it reads ``res.ok`` (``data.error`` if not)."""
    with angine.browser() as browser:
        made = browser.post("/api/v1/admin/keys", json={"name": "short-lived"}).json()
        revoked = browser.delete(f"/api/v1/admin/keys/{made['id']}")
        assert revoked.is_success
        again = browser.delete("/api/v1/admin/keys/no-such-key")
        assert again.status_code == 404 and "no-such-key" in error_text(again)
    with angine.browser(made["key"]) as holder:
        assert holder.get("/api/v1/jobs").status_code == 401


def test_keys_page_creates_a_key(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/keys/page.tsx:339`: ``POST /api/v1/admin/keys`` with
    ``{name, owner_email (or left out), scopes, rate_limit_rpm}``; it reads ``data.key``
    and ``data.id`` (``data.error`` if refused), then lists the keys again."""
    body = {
        "name": "CI runner",
        "owner_email": "ops@example.com",
        "scopes": ["jobs:read", "jobs:write"],
        "rate_limit_rpm": 60,
    }
    with angine.browser() as browser:
        created = browser.post("/api/v1/admin/keys", json=body)
        assert created.status_code == 201
        data = created.json()
        assert isinstance(data["key"], str) and isinstance(data["id"], str)
        no_email = browser.post(
            "/api/v1/admin/keys",
            json={"name": "no email", "scopes": ["jobs:read"], "rate_limit_rpm": 60},
        )
        assert no_email.status_code == 201
        no_scope = browser.post("/api/v1/admin/keys", json={**body, "scopes": []})
        assert no_scope.status_code == 400 and "scopes" in error_text(no_scope)
        listed = browser.get("/api/v1/admin/keys?active_only=false").json()["keys"]
    mine = next(key for key in listed if key["id"] == data["id"])
    assert (mine["name"], mine["owner_email"]) == ("CI runner", "ops@example.com")
    assert (mine["scopes"], mine["rate_limit_rpm"]) == (["jobs:read", "jobs:write"], 60)
    assert next(k for k in listed if k["id"] == no_email.json()["id"])["owner_email"] is None
    with angine.browser(data["key"]) as holder:
        assert holder.get("/api/v1/jobs").status_code == 200


# -- the dashboard: API playground ----------------------------------------------------


def test_playground_lists_the_active_keys(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/apis/page.tsx:140`: ``GET
    /api/v1/admin/keys?active_only=true``; it takes ``data.keys`` (and ``data.keys[0].id``
    as the one selected) and shows the selected key's fields as the keys page does."""
    with angine.browser() as browser:
        made = browser.post("/api/v1/admin/keys", json={"name": "gone"}).json()
        browser.delete(f"/api/v1/admin/keys/{made['id']}")
        answer = browser.get("/api/v1/admin/keys?active_only=true")
    assert answer.status_code == 200
    keys = answer.json()["keys"]
    assert keys and isinstance(keys[0]["id"], str)
    for key in keys:
        read_key(key)
        assert key["is_active"] is True
    assert made["id"] not in {key["id"] for key in keys}


def test_playground_uploads_a_file(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/apis/page.tsx:175`: ``POST /api/v1/jobs/upload``,
    multipart with the field ``file`` and only the Authorization header; on ``res.ok`` it
    keeps the answer whole (``filename``, ``storage_path``, ``public_url``) to send back
    as one of the job's ``attachments``."""
    with angine.browser() as browser:
        answer = browser.post(
            "/api/v1/jobs/upload", files={"file": ("notes.txt", b"eleven\n", "text/plain")}
        )
    assert answer.is_success
    uploaded = answer.json()
    assert uploaded["filename"] == "notes.txt" and uploaded["size_bytes"] == 7
    assert isinstance(uploaded["storage_path"], str)
    assert "public_url" in uploaded  # null: an upload is never public


def test_playground_submits_a_job_with_its_uploads(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/apis/page.tsx:202`: ``POST /api/v1/jobs`` with
    ``{task, model, timeout_seconds, hitl_mode, attachments}``, ``attachments`` being the
    upload answers as they came (left out when there are none); it reads ``job.id`` (and
    ``data.error`` if refused), then opens the job's page."""
    with angine.browser() as browser:
        uploaded = browser.post(
            "/api/v1/jobs/upload", files={"file": ("table.csv", b"a,b\n1,2\n", "text/csv")}
        ).json()
        with_file = submit(browser, "sum the table", attachments=[uploaded])
        without = submit(browser, "say hello")
        until(browser, with_file, "waiting_for_user")
        reused = browser.post("/api/v1/jobs", json={"task": "again", "attachments": [uploaded]})
        for mode in ("auto_execute", "always_ask"):
            assert submit(browser, f"mode {mode}", hitl_mode=mode)
        refused = browser.post("/api/v1/jobs", json={"task": "", "model": "x"})
    first = angine.model.conversation_of("sum the table")
    assert "Uploaded files available:\n- table.csv" in _text(first[-1])
    assert isinstance(without, str)
    assert reused.status_code == 404 and "attach" in error_text(reused)  # used once
    assert refused.status_code == 400 and error_text(refused)


def test_playground_discovers_tools(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/apis/page.tsx:248`: ``POST /api/v1/agents/discover``
    with ``{task, limit: 5}``; it maps ``data.agents`` and reads each one's ``id``,
    ``name``, ``package_name`` and ``(similarity * 100).toFixed(0)``."""
    with angine.browser() as browser:
        answer = browser.post(
            "/api/v1/agents/discover", json={"task": "shout text in capitals", "limit": 5}
        )
    assert answer.status_code == 200
    agents = answer.json()["agents"]
    assert [agent["id"] for agent in agents] == [angine.server_id]
    [found] = agents
    assert (found["name"], found["package_name"]) == ("echo", "@claybot-tests/echo")
    assert isinstance(found["similarity"], float) and 0 < found["similarity"] <= 1


# -- the dashboard: tools page ------------------------------------------------------------


def read_server(agent: dict[str, Any]) -> None:
    """What the tools page reads of a server: ``id``, ``name``, ``package_name``,
    ``description``, ``version``, ``category``, ``verified``, ``created_at``."""
    for name in ("id", "name", "package_name", "description", "version", "category"):
        assert isinstance(agent[name], str), name
    assert isinstance(agent["verified"], bool)
    iso(agent["created_at"])


def test_tools_page_lists_the_servers(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/tools/page.tsx:75`: ``GET
    /api/v1/agents?verified_only=true`` (``false`` with "Show unverified"); it maps
    ``data.agents``."""
    with angine.browser() as browser:
        verified = browser.get("/api/v1/agents?verified_only=true")
        every = browser.get("/api/v1/agents?verified_only=false")
    assert verified.status_code == every.status_code == 200
    for agent in every.json()["agents"]:
        read_server(agent)
    assert [a["id"] for a in verified.json()["agents"]] == [angine.server_id]
    assert {a["id"] for a in every.json()["agents"]} == {angine.server_id, angine.unverified_id}
    assert verified.json()["agents"][0]["verified"] is True


def test_tools_page_searches_then_reads_the_full_servers(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/tools/page.tsx:100` and `:117`: ``POST
    /api/v1/agents/discover`` with ``{task, threshold: 0.2, limit: 20}``, then ``GET
    /api/v1/agents?verified_only=<!showUnverified>``; it looks each found ``id`` up in the
    list (keeping those it finds) and shows ``Math.round(similarity * 100)``."""
    with angine.browser() as browser:
        found = browser.post(
            "/api/v1/agents/discover",
            json={"task": "capitals shouting", "threshold": 0.2, "limit": 20},
        )
        listed = browser.get("/api/v1/agents?verified_only=true")
    assert found.status_code == listed.status_code == 200
    full = {agent["id"]: agent for agent in listed.json()["agents"]}
    enriched = [
        {**full[agent["id"]], "similarity": agent["similarity"]}
        for agent in found.json()["agents"]
        if agent["id"] in full
    ]
    assert [agent["id"] for agent in enriched] == [angine.server_id]
    assert isinstance(enriched[0]["similarity"], float)


# -- the dashboard: workers page ----------------------------------------------------------


def test_workers_page_reads_workers_and_their_health(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/workers/page.tsx:81`: ``GET /api/v1/admin/workers``;
    it reads ``summary.healthy``, ``.warning``, ``.dead``, maps ``workers`` and reads each
    one's ``id``, ``hostname``, ``status``, ``health``, ``active_jobs`` and
    ``formatTimeAgo(seconds_since_heartbeat)`` (whole seconds)."""
    with angine.browser() as browser:
        answer = browser.get("/api/v1/admin/workers")
    assert answer.status_code == 200
    data = answer.json()
    assert all(is_int(data["summary"][name]) for name in ("healthy", "warning", "dead"))
    assert data["summary"]["healthy"] >= 1
    assert data["workers"]
    for worker in data["workers"]:
        assert isinstance(worker["id"], str) and isinstance(worker["status"], str)
        assert worker["hostname"] is None or isinstance(worker["hostname"], str)
        assert worker["health"] in ("healthy", "warning", "dead", "stopped")
        assert is_int(worker["active_jobs"]) and is_int(worker["seconds_since_heartbeat"])
    assert any(w["status"] == "active" and w["health"] == "healthy" for w in data["workers"])


# -- the dashboard: jobs and a job --------------------------------------------------------


def test_jobs_page_lists_jobs_with_and_without_a_status(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/jobs/page.tsx:92`: ``GET /api/v1/jobs?<params>``,
    ``params`` empty or ``status=<filter>``; it maps ``data.jobs`` and reads each one's
    ``id``, ``task``, ``status.replace(...)``, ``agent_question``, ``priority`` and
    ``new Date(created_at)``."""
    with angine.browser() as browser:
        waiting = waiting_plan(browser, "list me")
        every = browser.get("/api/v1/jobs?")
        filtered = browser.get("/api/v1/jobs?status=waiting_for_user")
    assert every.status_code == filtered.status_code == 200
    for job in every.json()["jobs"]:
        assert isinstance(job["id"], str) and isinstance(job["task"], str)
        assert job["status"] in JOB_STATUSES and is_int(job["priority"])
        assert job["agent_question"] is None or isinstance(job["agent_question"], str)
        iso(job["created_at"])
    assert waiting in {job["id"] for job in every.json()["jobs"]}
    assert waiting in {job["id"] for job in filtered.json()["jobs"]}
    assert {job["status"] for job in filtered.json()["jobs"]} == {"waiting_for_user"}


def test_job_page_reads_a_job_with_its_artifacts(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/jobs/[id]/page.tsx:119`: ``GET /api/v1/jobs/<id>``,
    the answer being the job itself; it reads ``id``, ``task``, ``status``,
    ``priority``, ``formatDuration(timeout_seconds)``, ``retry_count``, ``created_at``,
    ``started_at``, ``completed_at``, ``agent_question`` (``JSON.parse``d), ``result``,
    ``error_message``, ``tools_discovered`` (``length``, ``map``) and ``artifacts``
    (``map``: ``id``, ``url``, ``filename``, ``formatBytes(size_bytes)``); a refusal's
    ``data.error``."""
    with angine.browser() as browser:
        job_id = waiting_plan(browser, "write the result")
        waiting = browser.get(f"/api/v1/jobs/{job_id}").json()
        browser.post(f"/api/v1/jobs/{job_id}/respond", json={"answer": "ok", "action": "approve"})
        until(browser, job_id, "completed", "failed")
        answer = browser.get(f"/api/v1/jobs/{job_id}")
        unknown = browser.get("/api/v1/jobs/00000000-0000-4000-8000-000000000000")
    assert answer.status_code == 200
    job = answer.json()
    assert (job["id"], job["task"], job["status"]) == (job_id, "write the result", "completed")
    assert is_int(job["priority"]) and job["timeout_seconds"] == 300
    assert is_int(job["retry_count"])
    for moment in ("created_at", "started_at", "completed_at"):
        iso(job[moment])
    assert iso(waiting["paused_at"]) and waiting["status"] == "waiting_for_user"
    assert job["result"] == "Done: result.txt holds 55." and job["error_message"] is None
    tools = job["tools_discovered"]
    assert tools is None or all(isinstance(tool, str) for tool in tools)
    [artifact] = job["artifacts"]
    assert isinstance(artifact["id"], str) and artifact["filename"] == "result.txt"
    assert is_int(artifact["size_bytes"]) and artifact["size_bytes"] == 3
    assert isinstance(artifact["url"], str)
    assert unknown.status_code == 404 and error_text(unknown)


def test_job_page_links_each_artifact_for_a_browser_to_open(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/jobs/[id]/page.tsx:549`: ``<a href={artifact.url}
    target="_blank">``: the browser opens the URL itself, with no Authorization header.
    Angine's URLs were a public bucket's (anyone with one read the file, for ever);
    ClayBot's are signed: that file, without a key, for 10 to 15 minutes."""
    with angine.browser() as browser:
        job_id = waiting_plan(browser, "make a file to open")
        browser.post(f"/api/v1/jobs/{job_id}/respond", json={"answer": "Approved"})
        [artifact] = until(browser, job_id, "completed")["artifacts"]
        listed = browser.get(f"/api/v1/jobs/{job_id}/artifacts").json()["artifacts"]
    assert listed[0]["url"] == artifact["url"]
    path, _, query = artifact["url"].partition("?")
    with httpx.Client(base_url=angine.base_url) as tab:  # a new tab: no key, no header
        opened = tab.get(artifact["url"])
        bare = tab.get(path)
        forged = tab.get(f"{path}?{query[:-1]}{'1' if query[-1] == '0' else '0'}")
        other = tab.get(f"/api/v1/jobs/{job_id}/artifacts/{uuid.uuid4()}?{query}")
    assert opened.status_code == 200 and opened.content == b"55\n"
    assert opened.headers["content-disposition"] == 'attachment; filename="result.txt"'
    assert bare.status_code == forged.status_code == other.status_code == 401


def test_job_page_reads_the_log(angine: Angine) -> None:
    """`src/app/(dashboard)/dashboard/jobs/[id]/page.tsx:143`: ``GET
    /api/v1/jobs/<id>/logs``; on ``res.ok`` it maps ``data.logs`` and reads each line's
    ``id`` (the React key), ``new Date(timestamp)``, ``level`` and ``message``."""
    with angine.browser() as browser:
        job_id = waiting_plan(browser, "log me")
        answer = browser.get(f"/api/v1/jobs/{job_id}/logs")
    assert answer.status_code == 200
    logs = answer.json()["logs"]
    assert len(logs) >= 2
    for line in logs:
        assert is_int(line["id"]) and isinstance(line["message"], str)
        assert line["level"] in ("debug", "info", "warn", "error")
        iso(line["timestamp"])
    assert len({line["id"] for line in logs}) == len(logs)


@pytest.mark.parametrize(
    ("body", "result"),
    [
        ({"answer": "Approved", "action": "approve"}, "Done: result.txt holds 55."),
        ({"answer": "Too risky", "action": "reject"}, "Not done, as asked."),
        (
            {"answer": "", "action": "edit", "editedPlan": "## Plan\n\n1. Only this"},
            "Done: result.txt holds 55.",
        ),
        ({"answer": "Use blue", "action": "respond"}, "Done: result.txt holds 55."),
    ],
    ids=["approve", "reject", "edit", "respond"],
)
def test_job_page_answers_the_plan(angine: Angine, body: dict[str, str], result: str) -> None:
    """`src/app/(dashboard)/dashboard/jobs/[id]/page.tsx:170`: ``POST
    /api/v1/jobs/<id>/respond`` with ``{answer, action}`` (and ``editedPlan`` for an
    edit) as the page builds them: approve sends "Approved" when the box is empty, edit
    sends an empty ``answer`` when no feedback was typed (Angine's own server refused
    that); it reads ``res.ok`` (``data.error`` if not) and reads the job again."""
    with angine.browser() as browser:
        job_id = waiting_plan(browser, f"answer by {body['action']}")
        answered = browser.post(f"/api/v1/jobs/{job_id}/respond", json=body)
        assert answered.is_success, answered.text
        done = until(browser, job_id, "completed", "failed")
        late = browser.post(f"/api/v1/jobs/{job_id}/respond", json=body)
    assert done["result"] == result
    assert late.status_code == 400 and error_text(late)


# -- the worker ---------------------------------------------------------------------------


def test_worker_searches_the_registry(angine: Angine) -> None:
    """`worker/index.ts:212`: the ``discover_tools`` tool's ``POST
    /api/v1/agents/discover`` with ``{task: query, threshold: 0.3, limit: 5}`` and the
    worker's key as a Bearer token; on ``response.ok`` it reads ``data.agents`` and each
    one's ``id``, ``name`` and ``similarity``. (Everything else the worker does goes to
    the database; ClayBot's own workers do it: see the lifecycle tests.)"""
    with httpx.Client(
        base_url=angine.base_url, headers={"Authorization": f"Bearer {angine.key}"}
    ) as worker:
        answer = worker.post(
            "/api/v1/agents/discover",
            json={"task": "shouting in capitals", "threshold": 0.3, "limit": 5},
        )
    assert answer.status_code == 200
    [agent] = answer.json()["agents"]
    assert (agent["id"], agent["name"]) == (angine.server_id, "echo")
    assert isinstance(agent["similarity"], float)


# -- scripts/test-api.sh, each call as curl sends it ----------------------------------------


def curl(angine: Angine, method: str, path: str, data: str | None = None) -> httpx.Response:
    """A request as the scripts' curl sends it: the key, and JSON only with ``-d``."""
    headers = {"Authorization": f"Bearer {angine.key}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    with httpx.Client(base_url=angine.base_url, timeout=WAIT_S) as client:
        return client.request(method, path, headers=headers, content=data)


def test_api_script_opens_the_landing_page(angine: Angine) -> None:
    """`scripts/test-api.sh:28`: ``curl -s -o /dev/null -w "%{http_code}" $BASE_URL/``,
    expecting 200. Adapted: ``/`` is ClayBot's dashboard, which sends a visitor without a
    session to its login page (303); that page answers 200, so ClayBot's script follows
    the redirect (``curl -L``). Angine's script prints FAIL for this one check and still
    exits 0."""
    with httpx.Client(base_url=angine.base_url) as client:
        first = client.get("/")
        followed = client.get("/", follow_redirects=True)
    assert first.status_code == 303 and first.headers["location"] == "/login"
    assert followed.status_code == 200 and "text/html" in followed.headers["content-type"]


def test_api_script_lists_jobs(angine: Angine) -> None:
    """`scripts/test-api.sh:39`: ``GET /api/v1/jobs`` with the key; it reads the status
    code (200) and prints the body."""
    answer = curl(angine, "GET", "/api/v1/jobs")
    assert answer.status_code == 200 and isinstance(answer.json()["jobs"], list)


def test_api_script_creates_a_job(angine: Angine) -> None:
    """`scripts/test-api.sh:54`: ``POST /api/v1/jobs`` with ``{"task": ..., "model":
    "anthropic/claude-sonnet-4"}``; it reads 201 (or 200) and the job's id as the first
    ``"id":"..."`` of the raw answer."""
    body = (
        '{"task": "Calculate the sum of numbers from 1 to 100 and print the result", '
        '"model": "anthropic/claude-sonnet-4"}'
    )
    answer = curl(angine, "POST", "/api/v1/jobs", body)
    assert answer.status_code == 201
    job_id = grep_first("id", answer.text)
    assert job_id == answer.json()["id"] and job_id


def test_api_script_reads_the_job_and_its_log(angine: Angine) -> None:
    """`scripts/test-api.sh:78` and `:95`: ``GET /api/v1/jobs/$JOB_ID`` and ``GET
    /api/v1/jobs/$JOB_ID/logs``; each must answer 200."""
    created = curl(angine, "POST", "/api/v1/jobs", '{"task": "read me back"}')
    job_id = grep_first("id", created.text)
    job = curl(angine, "GET", f"/api/v1/jobs/{job_id}")
    logs = curl(angine, "GET", f"/api/v1/jobs/{job_id}/logs")
    assert job.status_code == 200 and job.json()["id"] == job_id
    assert logs.status_code == 200 and logs.json()["logs"]


def test_api_script_lists_agents(angine: Angine) -> None:
    """`scripts/test-api.sh:113`: ``GET /api/v1/agents``; 200. (It also prints the count
    of ``"name"`` in the raw answer as the number of agents: ClayBot lists each server's
    tools, whose names that count takes in too.)"""
    answer = curl(angine, "GET", "/api/v1/agents")
    assert answer.status_code == 200
    [server] = answer.json()["agents"]
    assert answer.text.count('"name"') == 1 + len(server["tools"])


def test_api_script_discovers_agents(angine: Angine) -> None:
    """`scripts/test-api.sh:131`: ``POST /api/v1/agents/discover`` with only ``{"task":
    "scrape a website and analyze the data"}``; 200."""
    body = '{"task": "scrape a website and analyze the data"}'
    answer = curl(angine, "POST", "/api/v1/agents/discover", body)
    assert answer.status_code == 200 and isinstance(answer.json()["agents"], list)


def test_api_script_reads_workers_and_metrics(angine: Angine) -> None:
    """`scripts/test-api.sh:151` and `:168`: ``GET /api/v1/admin/workers`` and ``GET
    /api/v1/admin/metrics`` with an admin key; each must answer 200."""
    assert curl(angine, "GET", "/api/v1/admin/workers").status_code == 200
    assert curl(angine, "GET", "/api/v1/admin/metrics").status_code == 200


# -- scripts/test-job-lifecycle.sh, each call as curl sends it ------------------------------


def test_lifecycle_script_creates_a_job(angine: Angine) -> None:
    """`scripts/test-job-lifecycle.sh:18`: ``POST /api/v1/jobs`` with ``{task, model,
    timeout_seconds: 120}`` (pretty-printed); the first ``"id":"..."`` is the job's."""
    body = (
        '{\n    "task": "Write a Python script that prints the Fibonacci sequence",\n'
        '    "model": "anthropic/claude-sonnet-4",\n    "timeout_seconds": 120\n  }'
    )
    answer = curl(angine, "POST", "/api/v1/jobs", body)
    assert answer.status_code == 201 and grep_first("id", answer.text) == answer.json()["id"]


def test_lifecycle_script_polls_answers_and_reads_the_result(angine: Angine) -> None:
    """`scripts/test-job-lifecycle.sh:43`, `:88`, `:58` and `:63`: ``GET
    /api/v1/jobs/$JOB_ID`` read with grep (the first ``"status":"..."`` is the job's;
    ``"agent_question":"...``); ``POST /api/v1/jobs/$JOB_ID/respond`` with only
    ``{"answer": "yes, proceed"}`` while it waits; once ``completed``, the first
    ``"result":"..."`` and ``"artifacts":[...]``."""
    created = curl(angine, "POST", "/api/v1/jobs", '{"task": "count to ten"}')
    job_id = grep_first("id", created.text)
    deadline = time.monotonic() + WAIT_S
    answered = 0
    while True:
        raw = curl(angine, "GET", f"/api/v1/jobs/{job_id}").text
        status = grep_first("status", raw)
        assert status == json.loads(raw)["status"]
        if status == "completed":
            break
        if status == "waiting_for_user":
            assert grep_first("agent_question", raw).startswith("{")
            respond = curl(
                angine, "POST", f"/api/v1/jobs/{job_id}/respond", '{"answer": "yes, proceed"}'
            )
            assert respond.status_code == 200
            answered += 1
        assert status in JOB_STATUSES - {"failed", "cancelled"}
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert answered == 1
    assert grep_first("result", raw) == "Done: result.txt holds 55."
    artifacts = re.search(r'"artifacts":\[[^]]*\]', raw)
    assert artifacts is not None and '"filename":"result.txt"' in artifacts.group(0)


# -- ClayBot's equivalents of the two scripts -----------------------------------------


@pytest.mark.parametrize(
    ("script", "last_line"),
    [("test-api.sh", "every check passed"), ("test-job-lifecycle.sh", "job completed")],
)
def test_our_equivalent_of_the_script_passes(angine: Angine, script: str, last_line: str) -> None:
    """`scripts/test-api.sh` and `scripts/test-job-lifecycle.sh`, written anew for
    ClayBot (``scripts/angine/``): bash, curl and python3, run against this engine."""
    env = {
        "PATH": os.environ["PATH"],
        "BASE_URL": angine.base_url,
        "API_KEY": angine.key,
        "POLL_INTERVAL_S": "0.2",
        "POLL_ATTEMPTS": "150",
    }
    ran = subprocess.run(
        ["bash", str(SCRIPTS / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "FAIL" not in ran.stdout and ran.stdout.strip().splitlines()[-1] == last_line
