"""codeck's web client against a real engine over TCP (seed 004's original).

The client is ``cyphercr0w/codeck`` at 32003b7: its API module ``src/web/src/api.ts``,
its store ``src/web/src/state/store.ts``, its WebSocket client ``src/web/src/ws.ts``,
its proactive agents section ``src/web/src/components/AgentsSection.tsx``, and how it
gets its token (``src/web/src/app.tsx``, ``src/web/src/components/AuthView.tsx``).
File references below are to those files at that commit.

Each test sends what the client sends (``apiFetch``: ``Authorization: Bearer <token>``,
``Content-Type: application/json`` only with a body; the WebSocket at the host's root
with ``?token=<encodeURIComponent(token)>`` and no header) and reads the answer as the
client does. ``Browser`` is ``ws.ts``'s ``onmessage`` and the store functions it calls,
written out: a message the client would warn about and drop lands in ``warnings``.

One engine serves the whole module, with the fake ``claude`` first on its PATH
(``tests/proactive/fake_claude.py``: it prints ``Working on: <objective>``) and its
default settings. Every agent is scheduled for midnight of a leap day, so nothing runs
but what a test asks for, and each test waits for its runs to end.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin

from claybot.api.ratelimit import MAX_AUTH_FAILURES_PER_MIN
from claybot.config.home import HomePaths
from claybot.config.settings import ProactiveSettings
from tests.conftest import ECHO_SETTINGS, EngineProcess, write_settings
from tests.proactive.conftest import install_fake_claude

pytestmark = pytest.mark.slow

NEVER = "0 0 29 2 *"  # a custom cron (the form takes one): midnight of a leap day
STALE_AFTER_S = 45.0  # ws.ts:110: no message for this long and the client reconnects
IDLE_S = 61.0  # "an idle minute", past the stale limit with room for one more check
# The idle minute runs with every period a fifth of the real one (a heartbeat every 5 s, the
# page's limit 9 s, idle for 12.2 s): the same beats in a fifth of the time. A beat may come
# up to 4 s late (a busy machine) before the page would give the connection up.
TIME_SCALE = 0.2
MAX_AGENT_OUTPUT = 512 * 1024  # store.ts:247
# ws.ts:5-9: every other type is dropped with a warning.
KNOWN_MSG_TYPES = frozenset(
    {
        "heartbeat",
        "status",
        "log",
        "logs",
        "ports",
        "sessions:restored",
        "console:error",
        "console:output",
        "console:exit",
        "agent:update",
        "agent:output",
        "agent:execution:start",
        "agent:execution:complete",
    }
)
# store.ts:201-219, the ProactiveAgent the card, the detail view and the edit form read.
PROACTIVE_AGENT: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "name": (str,),
    "status": (str,),
    "schedule": (str,),
    "objective": (str,),
    "cwd": (str,),
    "model": (str,),
    "timeoutMs": (int,),
    "maxRetries": (int,),
    "lastExecutionAt": (int, type(None)),
    "lastResult": (str, type(None)),
    "nextRunAt": (int, type(None)),
    "totalExecutions": (int,),
    "running": (bool,),
}
# AgentsSection.tsx:79-89, the ExecutionResult of the history list.
EXECUTION_RESULT: dict[str, tuple[type, ...]] = {
    "executionId": (str,),
    "agentId": (str,),
    "startedAt": (int,),
    "completedAt": (int,),
    "durationMs": (int,),
    "result": (str,),
    "exitCode": (int, type(None)),
    "outputLines": (int,),
}


def encode_uri_component(text: str) -> str:
    """JavaScript's ``encodeURIComponent``."""
    return quote(text, safe="-_.!~*'()")


def assert_shape(value: dict[str, Any], shape: dict[str, tuple[type, ...]]) -> None:
    for name, kinds in shape.items():
        assert name in value, f"{name!r} missing from {value}"
        assert isinstance(value[name], kinds), (name, value[name])
        assert not (bool not in kinds and isinstance(value[name], bool)), (name, value[name])


@dataclass
class Door:
    engine: EngineProcess
    host: str  # what location.host is for the page: where the client sends everything
    token: str  # what the login answered; the client keeps it in localStorage
    workspace: Path


@pytest.fixture(scope="module")
def codeck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    with open_door(ECHO_SETTINGS, tmp_path_factory.mktemp("codeck")) as door:
        yield door


@contextmanager
def open_door(settings: dict[str, Any], home: Path) -> Iterator[Door]:
    """An engine with ``settings`` and the fake ``claude`` (kept in ``home``), its key."""
    # Unix socket paths are limited to ~107 bytes; pytest's tmp paths can be long.
    paths = HomePaths(Path(f"/tmp/cb-codeck-{time.monotonic_ns() % 10**9}"))
    write_settings(paths, settings)
    fake = install_fake_claude(home / "fake")
    engine = EngineProcess(paths, {"PATH": fake.path})
    try:
        engine.start()  # in here: an engine that answers too late is stopped too
        with engine.client() as client:
            port = client.get("/v1/engine/status").json()["tcp"]["port"]
        key = create_key(engine, ["agents:read", "agents:write"])
        yield Door(engine, f"127.0.0.1:{port}", key, paths.workspace.resolve())
    finally:
        if engine.process is not None and engine.process.poll() is None:
            engine.terminate()
        engine.log.unlink(missing_ok=True)
        shutil.rmtree(paths.home, ignore_errors=True)


def create_key(engine: EngineProcess, scopes: list[str]) -> str:
    deadline = time.monotonic() + 15
    with engine.client() as client:
        while True:
            response = client.post(
                "/v1/engine/keys", json={"name": "codeck", "scopes": scopes, "rateLimitRpm": 6000}
            )
            if response.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the database opens after the socket
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


async def api_fetch(
    door: Door, url: str, method: str = "GET", body: Any = None, token: str | None = None
) -> httpx.Response:
    """api.ts:30-46: the token as a bearer, JSON's content type only with a body."""
    headers = {"Authorization": f"Bearer {token or door.token}"}
    content = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        content = json.dumps(body)
    async with httpx.AsyncClient(base_url=f"http://{door.host}", timeout=30) as client:
        return await client.request(method, url, headers=headers, content=content)


async def plain_fetch(door: Door, url: str, body: Any = None) -> httpx.Response:
    """``fetch`` as app.tsx and AuthView.tsx call it: no token at all."""
    async with httpx.AsyncClient(base_url=f"http://{door.host}", timeout=30) as client:
        if body is None:
            return await client.get(url)
        return await client.post(
            url, content=json.dumps(body), headers={"Content-Type": "application/json"}
        )


def create_body(name: str, objective: str, **advanced: Any) -> dict[str, Any]:
    """AgentsSection.tsx:284-292: what the create form sends (cwd only when changed)."""
    body = {
        "name": name,
        "objective": objective,
        "schedule": NEVER,
        "model": "",
        "timeoutMs": 5 * 60000,
        "maxRetries": 3,
    }
    return {**body, **advanced}


async def create_agent(door: Door, name: str, objective: str, **advanced: Any) -> str:
    response = await api_fetch(
        door, "/api/agents", "POST", create_body(name, objective, **advanced)
    )
    data = response.json()
    assert not data.get("error"), data  # AgentsSection.tsx:296
    listed = (await api_fetch(door, "/api/agents")).json()["agents"]
    [agent] = [a for a in listed if a["name"] == name]
    return str(agent["id"])


@dataclass
class Browser:
    """ws.ts:117-207 and the store functions it calls (store.ts:228-256)."""

    agents: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    workspace: str = "/workspace"  # store.ts:81, until a status message says otherwise
    warnings: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)

    def on_message(self, text: str) -> dict[str, Any]:
        raw = json.loads(text)
        if not (isinstance(raw, dict) and isinstance(raw.get("type"), str)) or (
            raw["type"] not in KNOWN_MSG_TYPES
        ):
            self.warnings.append(f"unknown or malformed message type: {raw!r}")
            return {}
        self.types.append(raw["type"])
        data = raw.get("data")
        kind = raw["type"]
        if kind == "status":
            if isinstance(data, dict) and data.get("workspace"):
                self.workspace = data["workspace"]  # store.ts:128-130
        elif kind == "agent:update":
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                self.update_agent(data)
            else:
                self.warnings.append(f"agent:update dropped: {raw!r}")
        elif kind == "agent:output":
            if isinstance(data, dict) and all(
                isinstance(data.get(k), str) for k in ("agentId", "text")
            ):
                current = self.outputs.get(data["agentId"], "") + data["text"]
                self.outputs[data["agentId"]] = current[-MAX_AGENT_OUTPUT:]
            else:
                self.warnings.append(f"agent:output dropped: {raw!r}")
        elif kind in ("agent:execution:start", "agent:execution:complete"):
            if isinstance(data, dict) and isinstance(data.get("agentId"), str):
                running = kind == "agent:execution:start"
                self.agents = [
                    {**a, "running": running} if a["id"] == data["agentId"] else a
                    for a in self.agents
                ]
            else:
                self.warnings.append(f"{kind} dropped: {raw!r}")
        return raw

    def update_agent(self, agent: dict[str, Any]) -> None:
        if any(a["id"] == agent["id"] for a in self.agents):
            self.agents = [{**a, **agent} if a["id"] == agent["id"] else a for a in self.agents]
        else:
            self.agents = [*self.agents, agent]

    def agent(self, agent_id: str) -> dict[str, Any]:
        [found] = [a for a in self.agents if a["id"] == agent_id]
        return found


@dataclass
class Tab:
    """One page's WebSocket: its connection and what its store holds."""

    ws: ClientConnection
    browser: Browser

    async def until(
        self, done: Callable[[dict[str, Any]], bool], timeout_s: float = 20
    ) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout_s):
            while True:
                message = self.browser.on_message(str(await self.ws.recv()))
                seen.append(message)
                if message and done(message):
                    return seen


@asynccontextmanager
async def tab(door: Door, token: str | None = None) -> AsyncIterator[Tab]:
    """ws.ts:83-86: ``ws://<host>`` with ``?token=`` and nothing else; a browser sends its
    Origin and answers pings, and sends none of its own."""
    url = f"ws://{door.host}?token={encode_uri_component(token or door.token)}"
    async with connect(url, origin=Origin(f"http://{door.host}"), ping_interval=None) as ws:
        page = Tab(ws, Browser())
        await page.until(lambda m: m["type"] == "status")
        # AgentsSection.tsx:798-800 loads the list when the section opens.
        page.browser.agents = (await api_fetch(door, "/api/agents")).json()["agents"]
        yield page
    assert page.browser.warnings == []


def of(agent_id: str, kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["type"] == kind and m["data"].get("id", m["data"].get("agentId")) == agent_id


# -- how the client gets its token -------------------------------------------------------


async def test_auth_status_says_a_login_is_needed(codeck: Door) -> None:
    """app.tsx:136-140: ``fetch('/api/auth/status')``, no token; it reads ``authRes.ok`` and
    ``authData.configured`` (true: ask for the password, here an API key)."""
    response = await plain_fetch(codeck, "/api/auth/status")
    assert response.is_success
    assert response.json()["configured"] is True
    assert response.headers["Cache-Control"] == "no-store"


async def test_login_with_an_api_key_answers_the_token_the_client_keeps(codeck: Door) -> None:
    """AuthView.tsx:57-65: ``POST /api/auth/login {password}`` (no token); on
    ``data.success`` it stores ``data.token`` (api.ts:9-11), which every later call sends
    (api.ts:36)."""
    response = await plain_fetch(codeck, "/api/auth/login", {"password": codeck.token})
    data = response.json()
    assert data["success"] is True and isinstance(data["token"], str)
    listed = await api_fetch(codeck, "/api/agents", token=data["token"])
    assert listed.status_code == 200 and isinstance(listed.json()["agents"], list)


async def test_a_wrong_password_is_refused_in_words(codeck: Door) -> None:
    """AuthView.tsx:62-68: ``data.success`` falsy shows ``data.error`` (text). A key that
    cannot read agents is no login for this section either."""
    jobs_only = create_key(codeck.engine, ["jobs:read"])
    for password in ("not-a-key", jobs_only):
        data = (await plain_fetch(codeck, "/api/auth/login", {"password": password})).json()
        assert not data.get("success")
        assert isinstance(data["error"], str) and data["error"]


async def test_too_many_wrong_keys_are_told_when_to_try_again(codeck: Door) -> None:
    """AuthView.tsx:62-68 shows ``data.error``: past the limit of wrong keys from one
    address it says so, with ``Retry-After``; the right key still logs in."""
    for _ in range(MAX_AUTH_FAILURES_PER_MIN + 1):
        refused = await plain_fetch(codeck, "/api/auth/login", {"password": "cb_wrong"})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert "too many wrong keys" in refused.json()["error"]
    data = (await plain_fetch(codeck, "/api/auth/login", {"password": codeck.token})).json()
    assert data["success"] is True


async def test_an_unknown_token_is_a_401_which_logs_the_client_out(codeck: Door) -> None:
    """api.ts:39-44: a 401 on any call clears the token and shows the login (a revoked
    key); a known key never gets one."""
    response = await api_fetch(codeck, "/api/agents", token="cb_revoked-or-unknown")
    assert response.status_code == 401
    assert (await api_fetch(codeck, "/api/agents")).status_code == 200


# -- the agents section -------------------------------------------------------------------


async def test_create_sends_the_forms_body_and_reads_no_error(codeck: Door) -> None:
    """AgentsSection.tsx:284-301: ``POST /api/agents`` with the form's fields; it reads
    ``data.error`` (absent on success), then reloads the list (AgentsSection.tsx:885)."""
    body = create_body("Create", "report", model="sonnet", timeoutMs=10 * 60000, maxRetries=5)
    response = await api_fetch(codeck, "/api/agents", "POST", body)
    data = response.json()
    assert response.is_success and not data.get("error"), data
    listed = (await api_fetch(codeck, "/api/agents")).json()["agents"]
    [agent] = [a for a in listed if a["name"] == "Create"]
    assert (agent["model"], agent["timeoutMs"], agent["maxRetries"]) == ("sonnet", 600000, 5)
    assert agent["cwd"] == str(codeck.workspace)  # no cwd sent: the workspace
    await api_fetch(codeck, f"/api/agents/{agent['id']}", "DELETE")


async def test_a_refused_create_says_why_in_text(codeck: Door) -> None:
    """AgentsSection.tsx:296-299: ``if (data.error) setError(data.error)``, shown as the
    form's text (AgentsSection.tsx:409): it must be a string that says what is wrong."""
    for bad in ({"schedule": "every day"}, {"cwd": "/etc"}, {"name": " "}):
        response = await api_fetch(codeck, "/api/agents", "POST", {**create_body("x", "y"), **bad})
        error = response.json()["error"]
        assert isinstance(error, str) and next(iter(bad)) in error, (bad, error)


async def test_the_folder_picker_lists_the_workspaces_folders(codeck: Door) -> None:
    """AgentsSection.tsx:124-131: ``/api/files?path=<encodeURIComponent(rel)>``; it keeps
    ``data.items`` whose ``isDirectory``, by ``name``; then Select gives
    ``${workspacePath}/${rel}`` (AgentsSection.tsx:117-119), workspacePath being what
    the WebSocket's ``status`` said, and the create form sends it as ``cwd``."""
    (codeck.workspace / "web app" / "src").mkdir(parents=True, exist_ok=True)
    (codeck.workspace / ".hidden").mkdir(exist_ok=True)
    (codeck.workspace / "notes.txt").write_text("not a folder")
    async with tab(codeck) as page:
        top = (await api_fetch(codeck, f"/api/files?path={encode_uri_component('')}")).json()
        names = [e["name"] for e in top["items"] if e["isDirectory"]]
        assert "web app" in names and ".hidden" not in names and "notes.txt" not in names
        rel = "web app"
        inner = (await api_fetch(codeck, f"/api/files?path={encode_uri_component(rel)}")).json()
        assert [e["name"] for e in inner["items"] if e["isDirectory"]] == ["src"]
        chosen = f"{page.browser.workspace}/{rel}/src"
        agent_id = await create_agent(codeck, "Picker", "report", cwd=chosen)
        listed = (await api_fetch(codeck, "/api/agents")).json()["agents"]
        [agent] = [a for a in listed if a["id"] == agent_id]
        assert agent["cwd"] == str(codeck.workspace / "web app" / "src")
        await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")
    missing = await api_fetch(codeck, "/api/files?path=nowhere")
    assert missing.json().get("items") is None  # the picker shows "No subdirectories"
    # A name no file system takes is no folder either, not a server error.
    for bad in ("%00", "a%00b"):
        refused = await api_fetch(codeck, f"/api/files?path={bad}")
        assert refused.status_code == 404 and "cannot be resolved" in refused.json()["error"]


async def test_the_list_has_every_field_the_cards_read(codeck: Door) -> None:
    """AgentsSection.tsx:796-800: ``GET /api/agents`` → ``data.agents``, each a
    ProactiveAgent (store.ts:201-219) the card reads (AgentsSection.tsx:213-248)."""
    agent_id = await create_agent(codeck, "Listed", "report")
    data = (await api_fetch(codeck, "/api/agents")).json()
    [agent] = [a for a in data["agents"] if a["id"] == agent_id]
    assert_shape(agent, PROACTIVE_AGENT)
    assert agent["status"] == "active" and agent["running"] is False
    assert agent["nextRunAt"] > time.time() * 1000  # "Next: in …" (AgentsSection.tsx:225)
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")


async def test_edit_sends_every_field_back_and_reads_no_error(codeck: Door) -> None:
    """AgentsSection.tsx:455-471: ``PUT /api/agents/:id`` with all the form's fields, the
    cwd being the agent's own (or workspacePath when emptied); ``data.error`` when refused."""
    agent_id = await create_agent(codeck, "Edited", "report")
    async with tab(codeck) as page:
        agent = page.browser.agent(agent_id)
        body = {
            "name": "Edited again",
            "objective": "report more",
            "schedule": "0 0 29 2 1",
            "cwd": agent["cwd"].strip() or page.browser.workspace,
            "model": agent["model"] or "",
            "timeoutMs": round(agent["timeoutMs"] / 60000) * 60000,
            "maxRetries": agent["maxRetries"],
        }
        data = (await api_fetch(codeck, f"/api/agents/{agent_id}", "PUT", body)).json()
        assert not data.get("error"), data
        await page.until(
            lambda m: of(agent_id, "agent:update")(m) and m["data"]["name"] != "Edited"
        )
        edited = page.browser.agent(agent_id)
        assert (edited["name"], edited["objective"]) == ("Edited again", "report more")
        emptied = {**body, "cwd": page.browser.workspace}  # `cwd.trim() || workspacePath.value`
        data = (await api_fetch(codeck, f"/api/agents/{agent_id}", "PUT", emptied)).json()
        assert not data.get("error"), data
        refused = await api_fetch(
            codeck, f"/api/agents/{agent_id}", "PUT", {**body, "schedule": "x"}
        )
        assert isinstance(refused.json()["error"], str)
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")


@pytest.mark.parametrize("where", ["card", "detail"])
async def test_pause_and_resume_reach_the_page_as_updates(codeck: Door, where: str) -> None:
    """AgentsSection.tsx:807/809 (card) and :644/646 (detail): ``POST .../pause`` and
    ``.../resume``, answers unread: the page learns the new status only from
    ``agent:update`` (ws.ts:187-190), which the Pause/Resume button follows."""
    agent_id = await create_agent(codeck, f"Paused {where}", "report")
    async with tab(codeck) as page:
        response = await api_fetch(codeck, f"/api/agents/{agent_id}/pause", "POST")
        assert response.is_success
        await page.until(
            lambda m: of(agent_id, "agent:update")(m) and m["data"]["status"] == "paused"
        )
        assert page.browser.agent(agent_id)["status"] == "paused"
        response = await api_fetch(codeck, f"/api/agents/{agent_id}/resume", "POST")
        assert response.is_success
        await page.until(
            lambda m: of(agent_id, "agent:update")(m) and m["data"]["status"] == "active"
        )
        agent = page.browser.agent(agent_id)
        assert agent["status"] == "active" and agent["nextRunAt"] is not None
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")


@pytest.mark.parametrize("where", ["card", "detail"])
async def test_run_now_streams_its_output_to_the_page(codeck: Door, where: str) -> None:
    """AgentsSection.tsx:811-812 (card) and :648-649 (detail): the output is cleared, then
    ``POST .../execute`` (answer unread). The page follows the run by WebSocket only:
    ``agent:execution:start`` (running), ``agent:output`` {agentId, text} appended,
    ``agent:execution:complete`` (not running), ``agent:update`` (ws.ts:187-202)."""
    agent_id = await create_agent(codeck, f"Run {where}", f"run from the {where}")
    async with tab(codeck) as page:
        page.browser.outputs.pop(agent_id, None)  # clearAgentOutput
        response = await api_fetch(codeck, f"/api/agents/{agent_id}/execute", "POST")
        assert response.is_success
        await page.until(of(agent_id, "agent:execution:start"))
        assert page.browser.agent(agent_id)["running"] is True
        seen = await page.until(of(agent_id, "agent:execution:complete"))
        assert page.browser.agent(agent_id)["running"] is False
        assert "agent:output" in [m.get("type") for m in seen]
        assert f"Working on: run from the {where}" in page.browser.outputs[agent_id]
        await page.until(
            lambda m: of(agent_id, "agent:update")(m) and m["data"]["totalExecutions"] == 1
        )
        agent = page.browser.agent(agent_id)
        assert (agent["running"], agent["lastResult"]) == (False, "success")
        assert agent["lastExecutionAt"] is not None
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")


async def test_live_output_is_there_for_a_page_opened_mid_run(codeck: Door) -> None:
    """AgentsSection.tsx:598-619: a detail view opened while the agent runs, with nothing
    buffered, asks ``/api/agents/:id/output`` and shows ``res.text()`` if ``res.ok``."""
    agent_id = await create_agent(codeck, "Live", "SLEEP=3 then finish")
    async with tab(codeck) as page:
        await api_fetch(codeck, f"/api/agents/{agent_id}/execute", "POST")
        await page.until(lambda m: of(agent_id, "agent:output")(m))
        assert page.browser.agent(agent_id)["running"] is True
        response = await api_fetch(codeck, f"/api/agents/{agent_id}/output")
        assert response.is_success and "Working on: SLEEP=3" in response.text
        await page.until(of(agent_id, "agent:execution:complete"))
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")


async def test_the_history_and_each_runs_log(codeck: Door) -> None:
    """AgentsSection.tsx:621-627: ``executions?limit=20`` → ``data.executions`` (an
    ExecutionResult each: AgentsSection.tsx:754-764), and :629-638: a row's click asks
    ``/logs?ts=<startedAt>`` (that run's log), the viewer ``/logs`` (the newest)."""
    agent_id = await create_agent(codeck, "History", "first objective")
    async with tab(codeck) as page:
        for objective in ("first objective", "second objective"):
            change = {**create_body("History", objective), "cwd": str(codeck.workspace)}
            assert (
                not (await api_fetch(codeck, f"/api/agents/{agent_id}", "PUT", change))
                .json()
                .get("error")
            )
            await api_fetch(codeck, f"/api/agents/{agent_id}/execute", "POST")
            await page.until(of(agent_id, "agent:execution:complete"))
    data = (await api_fetch(codeck, f"/api/agents/{agent_id}/executions?limit=20")).json()
    second, first = data["executions"]  # newest first
    for execution in (first, second):
        assert_shape(execution, EXECUTION_RESULT)
        assert execution["result"] == "success" and execution["outputLines"] > 0
    assert first["startedAt"] < second["startedAt"]
    older = await api_fetch(codeck, f"/api/agents/{agent_id}/logs?ts={first['startedAt']}")
    assert older.is_success and "Working on: first objective" in older.text
    assert "second objective" not in older.text
    newest = await api_fetch(codeck, f"/api/agents/{agent_id}/logs")
    assert newest.is_success and "Working on: second objective" in newest.text
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")


async def test_delete_removes_the_agent(codeck: Door) -> None:
    """AgentsSection.tsx:813-816: ``DELETE /api/agents/:id`` (answer unread), then the card
    is removed locally; the next list no longer has it, and the page is told nothing it
    would warn about (codeck's client knows no deletion message)."""
    agent_id = await create_agent(codeck, "Deleted", "report")
    async with tab(codeck) as page:
        response = await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")
        assert response.is_success
        marker = await create_agent(codeck, "After delete", "report")
        await page.until(of(marker, "agent:update"))  # anything about the deletion came before
    listed = (await api_fetch(codeck, "/api/agents")).json()["agents"]
    assert agent_id not in [a["id"] for a in listed]
    await api_fetch(codeck, f"/api/agents/{marker}", "DELETE")


# -- the WebSocket ----------------------------------------------------------------------------


async def test_the_websocket_takes_the_token_in_the_query_at_the_root(codeck: Door) -> None:
    """ws.ts:83-86: ``ws://<host>?token=<encodeURIComponent(token)>``, the root path, no
    header. Its first message is ``status`` (ws.ts:128-146), whose ``workspace`` the folder
    picker starts at; the terminal messages the page sends (ws.ts:59-78,
    ``console:attach``) change nothing. A wrong token is refused; the token is in no log."""
    async with tab(codeck) as page:
        assert page.browser.workspace == str(codeck.workspace)
        await page.ws.send(json.dumps({"type": "console:attach", "sessionId": "s1"}))
        await page.ws.send(json.dumps({"type": "console:resize", "sessionId": "s1"}).encode())
        agent_id = await create_agent(codeck, "Socket", "report")
        await page.until(of(agent_id, "agent:update"))
        assert_shape(page.browser.agent(agent_id), PROACTIVE_AGENT)
    await api_fetch(codeck, f"/api/agents/{agent_id}", "DELETE")
    with pytest.raises(InvalidStatus) as refused:
        async with tab(codeck, token="cb_not-a-key"):
            pass
    assert refused.value.response.status_code == 401
    logs = [codeck.engine.output(), *(p.read_text() for p in codeck.engine.paths.logs.glob("*"))]
    assert all(codeck.token not in text for text in logs)


@pytest.fixture
def quick_beats(tmp_path: Path) -> Iterator[Door]:
    """An engine of its own whose heartbeat is the default's, scaled by ``TIME_SCALE``."""
    beat_s = ProactiveSettings().ws_heartbeat_s * TIME_SCALE
    with open_door({**ECHO_SETTINGS, "proactive": {"wsHeartbeatS": beat_s}}, tmp_path) as door:
        yield door


async def test_the_websocket_stays_connected_through_an_idle_minute(quick_beats: Door) -> None:
    """ws.ts:106-114: every 10 s the page closes a connection that has received nothing for
    45 s (and ws.ts:126-127 drops the ``heartbeat`` that prevents it).

    The engine's default ``proactive.wsHeartbeatS`` (25 s) against the page's 45 s, every
    period scaled by ``TIME_SCALE`` (the heartbeat is configured as the scaled default):
    connected and idle for a scaled 61 s, longer than the scaled 45 s the page tolerates,
    it receives only heartbeats, never a scaled 45 s apart, and is still open at the end
    (a change made then reaches it). tests/proactive/test_websocket.py checks that no
    setting can make the heartbeat 45 s or longer."""
    stale_after_s, idle_s = STALE_AFTER_S * TIME_SCALE, IDLE_S * TIME_SCALE
    async with tab(quick_beats) as page:
        began = last = time.monotonic()
        gaps: list[float] = []
        kinds: list[str] = []
        while (left := began + idle_s - time.monotonic()) > 0:
            try:
                async with asyncio.timeout(left):
                    message = page.browser.on_message(str(await page.ws.recv()))
            except TimeoutError:
                break
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            kinds.append(message.get("type", "?"))
        gaps.append(time.monotonic() - last)
        assert kinds and set(kinds) == {"heartbeat"}, kinds
        assert len(kinds) >= 2 and max(gaps) < stale_after_s, gaps
        agent_id = await create_agent(quick_beats, "After a minute", "report")
        await page.until(of(agent_id, "agent:update"))
