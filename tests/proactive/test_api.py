"""``/api/agents`` and its WebSocket on a real engine served by uvicorn on a Unix socket."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from websockets.asyncio.client import ClientConnection, unix_connect

from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.server.app import create_app
from claybot.server.listeners import bind_unix_socket, make_server
from tests.conftest import write_settings
from tests.proactive.conftest import FakeClaude, install_fake_claude

pytestmark = pytest.mark.asyncio(loop_scope="module")

SETTINGS: dict[str, Any] = {
    "providers": [{"id": "s", "type": "scripted", "model": "echo"}],
    "proactive": {"maxAgents": 10, "maxConcurrent": 2},
}


@dataclass
class Served:
    engine: Engine
    api: httpx.AsyncClient
    socket: Path
    fake: FakeClaude
    workspace: Path

    def ws(self) -> Any:
        return unix_connect(str(self.socket), uri="ws://claybot/api/agents/ws")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    home = Path(f"/tmp/cb-px-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    paths = HomePaths(home)
    write_settings(paths, SETTINGS)
    fake = install_fake_claude(tmp_path_factory.mktemp("fake"))
    env = {**os.environ, "PATH": fake.path, "PROACTIVE_TEST_SECRET_TOKEN": "do-not-leak-0123"}
    engine = Engine(paths, EngineOptions(port=0, env=env))
    await engine.start()
    server = make_server(create_app(engine))
    serving = asyncio.create_task(server.serve(sockets=[bind_unix_socket(paths.socket)]))
    while not server.started:
        await asyncio.sleep(0.01)
    transport = httpx.AsyncHTTPTransport(uds=str(paths.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://claybot", timeout=30) as api:
        yield Served(engine, api, paths.socket, fake, paths.workspace.resolve())
    server.should_exit = True
    await engine.stop(drain_timeout_s=2)
    await serving
    await asyncio.to_thread(shutil.rmtree, home, ignore_errors=True)


async def create(s: Served, **fields: Any) -> dict[str, Any]:
    payload = {"name": "Agent", "objective": "report", "schedule": "0 0 1 1 *", **fields}
    response = await s.api.post("/api/agents", json=payload)
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()["agent"]
    return agent


async def receive_until(
    ws: ClientConnection, done: Any, timeout_s: float = 15
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout_s):
        while True:
            message = json.loads(await ws.recv())
            message["_at"] = time.monotonic()
            messages.append(message)
            if done(message):
                return messages


def completes(agent_id: str) -> Any:
    return lambda m: m["type"] == "agent:execution:complete" and m["data"]["agentId"] == agent_id


async def test_output_is_streamed_over_the_websocket_while_the_run_goes_on(
    served: Served,
) -> None:
    async with served.ws() as ws:
        first = json.loads(await ws.recv())
        assert first["type"] == "agent:list" and isinstance(first["data"]["agents"], list)
        agent = await create(served, objective="SLOW stream please")
        execute = await served.api.post(f"/api/agents/{agent['id']}/execute")
        assert execute.status_code == 202 and execute.json()["status"] == "started"
        messages = await receive_until(ws, completes(agent["id"]))
        after = json.loads(await ws.recv())
    assert after["type"] == "agent:update" and after["data"]["running"] is False

    mine = [m for m in messages if m["data"].get("agentId", m["data"].get("id")) == agent["id"]]
    types = [m["type"] for m in mine]
    assert types[0] == "agent:update" and "agent:execution:start" in types
    outputs = [m for m in mine if m["type"] == "agent:output"]
    text = "".join(m["data"]["text"] for m in outputs)
    assert text.startswith("Working on: SLOW stream please\n")
    assert "tick 0 tick 1 " in text and text.endswith("All checks passed.\n")
    # Streamed: the first ticks arrived well before the run (ten 0.1 s ticks) ended.
    tick0 = next(m for m in outputs if "tick 0" in m["data"]["text"])
    assert mine[-1]["_at"] - tick0["_at"] > 0.5
    complete = mine[-1]["data"]
    assert complete["result"] == "success"
    assert complete["executionId"] == execute.json()["executionId"]
    running = [m["data"]["running"] for m in mine if m["type"] == "agent:update"]
    assert running[-1] is True  # the last update before "complete" is the running one

    logs = await served.api.get(f"/api/agents/{agent['id']}/logs")
    assert logs.status_code == 200 and logs.headers["content-type"].startswith("text/plain")
    assert logs.text == text
    by_id = await served.api.get(
        f"/api/agents/{agent['id']}/logs", params={"executionId": complete["executionId"]}
    )
    assert by_id.text == text
    started = (await served.api.get(f"/api/agents/{agent['id']}/executions")).json()
    by_start = await served.api.get(
        f"/api/agents/{agent['id']}/logs", params={"ts": started["executions"][0]["startedAt"]}
    )
    assert by_start.text == text  # seed 004's client asks by the run's startedAt
    output = await served.api.get(f"/api/agents/{agent['id']}/output")
    assert output.text == text
    executions = (await served.api.get(f"/api/agents/{agent['id']}/executions")).json()
    assert [e["executionId"] for e in executions["executions"]] == [complete["executionId"]]
    # The fake claude saw none of the engine's secrets.
    [run] = [r for r in served.fake.runs() if r["prompt"] == "SLOW stream please"]
    assert "PROACTIVE_TEST_SECRET_TOKEN" not in run["env"]
    assert "do-not-leak" not in json.dumps(run["env"])


async def test_the_engine_runner_runs_the_objective_as_an_engine_agent(served: Served) -> None:
    async with served.ws() as ws:
        await ws.recv()
        agent = await create(served, objective="summarise the news", runner="engine")
        assert agent["runner"] == "engine"
        await served.api.post(f"/api/agents/{agent['id']}/execute")
        messages = await receive_until(ws, completes(agent["id"]))
    assert messages[-1]["data"]["result"] == "success"
    streamed = "".join(
        m["data"]["text"]
        for m in messages
        if m["type"] == "agent:output" and m["data"]["agentId"] == agent["id"]
    )
    expected = f"echo: Working directory: {served.workspace}\n\nsummarise the news\n"
    assert streamed == expected
    logs = await served.api.get(f"/api/agents/{agent['id']}/logs")
    assert logs.text == expected
    [execution] = (await served.api.get(f"/api/agents/{agent['id']}/executions")).json()[
        "executions"
    ]
    assert execution["result"] == "success" and execution["outputLines"] == 3
    folder = served.engine.paths.home / "proactive" / agent["id"] / "executions"
    [raw] = folder.glob("*.jsonl")
    records = [json.loads(line) for line in raw.read_text().splitlines()]
    assert [r["type"] for r in records] == ["user_message", "assistant_message"]
    # A second run starts from a fresh context, like `claude -p`.
    async with served.ws() as ws:
        await ws.recv()
        await served.api.post(f"/api/agents/{agent['id']}/execute")
        await receive_until(ws, completes(agent["id"]))
    engine_agents = served.engine.agents.listings.agents()
    assert (
        sum(
            1
            for a in engine_agents
            if a["descriptor"] == {"type": "cron", "id": f"proactive-{agent['id']}"}
        )
        == 1
    )


async def test_create_read_edit_pause_resume_delete(served: Served) -> None:
    project = served.workspace / "proj"
    project.mkdir(exist_ok=True)
    agent = await create(
        served, name="  Tests  ", cwd="proj", model="sonnet", timeoutMs=60_000, maxRetries=5,
        timezone="Europe/Berlin", schedule="30 7 * * 1-5",
    )  # fmt: skip
    assert agent["name"] == "Tests" and agent["cwd"] == str(project)
    assert (agent["model"], agent["timeoutMs"], agent["maxRetries"]) == ("sonnet", 60_000, 5)
    assert agent["status"] == "active" and agent["nextRunAt"] is not None
    agent_id = agent["id"]
    listed = (await served.api.get("/api/agents")).json()["agents"]
    assert agent_id in [a["id"] for a in listed]
    got = (await served.api.get(f"/api/agents/{agent_id}")).json()["agent"]
    assert got["consecutiveFailures"] == 0 and got["createdAt"] == got["updatedAt"]

    edited = await served.api.put(
        f"/api/agents/{agent_id}", json={"objective": "new objective", "model": None}
    )
    assert edited.status_code == 200
    changed = edited.json()["agent"]
    assert changed["objective"] == "new objective" and changed["model"] == ""
    assert changed["name"] == "Tests" and changed["createdAt"] == agent["createdAt"]

    paused = (await served.api.post(f"/api/agents/{agent_id}/pause")).json()["agent"]
    assert paused["status"] == "paused" and paused["nextRunAt"] is None
    resumed = (await served.api.post(f"/api/agents/{agent_id}/resume")).json()["agent"]
    assert resumed["status"] == "active" and resumed["nextRunAt"] is not None

    deleted = await served.api.delete(f"/api/agents/{agent_id}")
    assert deleted.status_code == 200 and deleted.json() == {"ok": True, "id": agent_id}
    assert (await served.api.get(f"/api/agents/{agent_id}")).status_code == 404
    assert not (served.engine.paths.home / "proactive" / agent_id).exists()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def target(served: Served) -> dict[str, Any]:
    """An agent the bad requests aim at; also what must stay unchanged."""
    outside = served.workspace.parent / "outside"
    outside.mkdir(exist_ok=True)
    link = served.workspace / "escape"
    if not link.exists():
        link.symlink_to(outside, target_is_directory=True)
    (served.workspace / "a-file").write_text("x")
    return await create(served, name="Target")


A = "{id}"  # replaced by the target agent's id
AGENTS = "/api/agents"
ONE = f"/api/agents/{A}"


def new(**fields: Any) -> dict[str, Any]:
    """A valid create body with some fields changed (None removes a field)."""
    body = {"name": "n", "objective": "o", "schedule": "* * * * *", **fields}
    return {key: value for key, value in body.items() if value is not None}


BAD_REQUESTS: list[tuple[str, str, str, Any, int, str | None]] = [
    # (case, method, path, json body or query, status, field)
    ("create: empty body", "POST", AGENTS, {}, 422, "body.name"),
    ("create: no schedule", "POST", AGENTS, new(schedule=None), 422, "body.schedule"),
    ("create: name too long", "POST", AGENTS, new(name="n" * 51), 422, "body.name"),
    ("create: blank name", "POST", AGENTS, new(name="   "), 422, "body.name"),
    ("create: control char in name", "POST", AGENTS, new(name="a\x07b"), 422, "body.name"),
    ("create: empty objective", "POST", AGENTS, new(objective=""), 422, "body.objective"),
    ("create: objective too long", "POST", AGENTS, new(objective="o" * 10_001), 422,
     "body.objective"),
    ("create: NUL in objective", "POST", AGENTS, new(objective="a\x00b"), 422, "body.objective"),
    ("create: objective read as an option", "POST", AGENTS,
     new(objective="--dangerously-skip-permissions"), 422, "objective"),
    ("create: bad cron", "POST", AGENTS, new(schedule="every day"), 422, "body.schedule"),
    ("create: out-of-range cron", "POST", AGENTS, new(schedule="61 * * * *"), 422,
     "body.schedule"),
    ("create: six fields", "POST", AGENTS, new(schedule="0 * * * * *"), 422, "body.schedule"),
    ("create: unknown zone", "POST", AGENTS, new(timezone="Mars/Olympus"), 422, "body.timezone"),
    ("create: path as zone", "POST", AGENTS, new(timezone="../../etc/passwd"), 422,
     "body.timezone"),
    ("create: cwd outside", "POST", AGENTS, new(cwd="/etc"), 422, "cwd"),
    ("create: cwd dot-dot", "POST", AGENTS, new(cwd="../.."), 422, "cwd"),
    ("create: cwd missing", "POST", AGENTS, new(cwd="no/such/dir"), 422, "cwd"),
    ("create: cwd a file", "POST", AGENTS, new(cwd="a-file"), 422, "cwd"),
    ("create: cwd symlink out", "POST", AGENTS, new(cwd="escape"), 422, "cwd"),
    ("create: cwd NUL", "POST", AGENTS, new(cwd="a\x00b"), 422, "body.cwd"),
    ("create: zero timeout", "POST", AGENTS, new(timeoutMs=0), 422, "body.timeoutMs"),
    ("create: string timeout", "POST", AGENTS, new(timeoutMs="300000"), 422, "body.timeoutMs"),
    ("create: boolean timeout", "POST", AGENTS, new(timeoutMs=True), 422, "body.timeoutMs"),
    ("create: huge timeout", "POST", AGENTS, new(timeoutMs=10**12), 422, "body.timeoutMs"),
    ("create: zero retries", "POST", AGENTS, new(maxRetries=0), 422, "body.maxRetries"),
    ("create: model as option", "POST", AGENTS, new(model="--help"), 422, "body.model"),
    ("create: unknown runner", "POST", AGENTS, new(runner="bash"), 422, "body.runner"),
    ("create: id given", "POST", AGENTS, new(id="mine"), 422, "body.id"),
    ("create: list body", "POST", AGENTS, [1, 2], 422, "body"),
    ("create: malformed JSON", "POST", AGENTS, b"{nope", 400, None),
    ("get: unknown", "GET", f"{AGENTS}/nope", None, 404, "id"),
    ("update: unknown", "PUT", f"{AGENTS}/nope", {"name": "x"}, 404, "id"),
    ("update: id", "PUT", ONE, {"id": "other"}, 422, "body.id"),
    ("update: createdAt", "PUT", ONE, {"createdAt": 1}, 422, "body.createdAt"),
    ("update: status", "PUT", ONE, {"status": "active"}, 422, "body.status"),
    ("update: state field", "PUT", ONE, {"consecutiveFailures": 0}, 422,
     "body.consecutiveFailures"),
    ("update: null name", "PUT", ONE, {"name": None}, 422, "body.name"),
    ("update: bad cron", "PUT", ONE, {"schedule": "* *"}, 422, "body.schedule"),
    ("update: unknown zone", "PUT", ONE, {"timezone": "Nowhere/Land"}, 422, "body.timezone"),
    ("update: cwd outside", "PUT", ONE, {"cwd": "/"}, 422, "cwd"),
    ("update: cwd symlink out", "PUT", ONE, {"cwd": "escape"}, 422, "cwd"),
    ("update: option objective", "PUT", ONE, {"objective": "-x"}, 422, "objective"),
    ("update: negative retries", "PUT", ONE, {"maxRetries": -1}, 422, "body.maxRetries"),
    ("update: not an object", "PUT", ONE, "text", 422, "body"),
    ("pause: unknown", "POST", f"{AGENTS}/nope/pause", None, 404, "id"),
    ("resume: unknown", "POST", f"{AGENTS}/nope/resume", None, 404, "id"),
    ("execute: unknown", "POST", f"{AGENTS}/nope/execute", None, 404, "id"),
    ("delete: unknown", "DELETE", f"{AGENTS}/nope", None, 404, "id"),
    ("logs: unknown agent", "GET", f"{AGENTS}/nope/logs", None, 404, "id"),
    ("logs: none yet", "GET", f"{ONE}/logs", None, 404, "id"),
    ("logs: unknown execution", "GET", f"{ONE}/logs", {"executionId": "nope"}, 404,
     "executionId"),
    ("logs: no run started then", "GET", f"{ONE}/logs", {"ts": 1}, 404, "ts"),
    ("logs: ts past year 9999", "GET", f"{ONE}/logs", {"ts": 253402300800000}, 422, "query.ts"),
    ("executions: unknown", "GET", f"{AGENTS}/nope/executions", None, 404, "id"),
    ("executions: limit 0", "GET", f"{ONE}/executions", {"limit": 0}, 422, "query.limit"),
    ("executions: limit too big", "GET", f"{ONE}/executions", {"limit": 1001}, 422,
     "query.limit"),
    ("executions: limit text", "GET", f"{ONE}/executions", {"limit": "ten"}, 422, "query.limit"),
    ("output: unknown", "GET", f"{AGENTS}/nope/output", None, 404, "id"),
    ("output: none yet", "GET", f"{ONE}/output", None, 404, "id"),
    ("method: patch", "PATCH", ONE, {"name": "x"}, 405, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "payload", "status", "field"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_REQUESTS],
)
async def test_bad_input_gets_a_4xx_naming_the_field_and_changes_nothing(
    served: Served,
    target: dict[str, Any],
    method: str,
    path: str,
    payload: Any,
    status: int,
    field: str | None,
) -> None:
    before = (await served.api.get("/api/agents")).json()["agents"]
    url = path.replace(A, target["id"])
    kwargs: dict[str, Any] = {}
    if isinstance(payload, bytes):
        kwargs["content"] = payload
        kwargs["headers"] = {"content-type": "application/json"}
    elif method == "GET" and payload is not None:
        kwargs["params"] = payload
    elif payload is not None:
        kwargs["json"] = payload
    response = await served.api.request(method, url, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()  # codeck's shape: the message is the string its client shows
    assert error["ok"] is False and error["code"] and isinstance(error["error"], str)
    assert error["error"] and error.get("field") == field
    after = (await served.api.get("/api/agents")).json()["agents"]
    assert after == before


async def test_the_agent_limit_is_a_409(served: Served) -> None:
    count = len((await served.api.get("/api/agents")).json()["agents"])
    made = [(await create(served, name=f"filler {n}"))["id"] for n in range(10 - count)]
    response = await served.api.post(
        "/api/agents", json={"name": "one too many", "objective": "o", "schedule": "* * * * *"}
    )
    assert response.status_code == 409
    assert response.json()["code"] == "too_many_agents"
    assert "maxAgents" in response.json()["error"]
    for agent_id in made:
        assert (await served.api.delete(f"/api/agents/{agent_id}")).status_code == 200


async def test_too_many_queued_manual_runs_are_refused_not_dropped(served: Served) -> None:
    agent = await create(served, objective="SLEEP=2 hold the slot")
    answers = [
        (await served.api.post(f"/api/agents/{agent['id']}/execute")).status_code for _ in range(12)
    ]
    assert answers == [202] * 11 + [409]  # one running, ten waiting, the next one told
    assert (await served.api.delete(f"/api/agents/{agent['id']}")).status_code == 200


SEED_EXAMPLE = {
    "name": "Test Runner",
    "objective": "Run the test suite and fix any failures",
    "schedule": "0 * * * *",
    "cwd": "/workspace/my-project",
    "model": "sonnet",
    "timeoutMs": 300000,
    "maxRetries": 3,
}


async def test_seed_004s_own_example_is_refused_by_the_setting_that_would_allow_it(
    served: Served,
) -> None:
    """/workspace/my-project is outside this engine's workspace (and absent here): the
    answer names proactive.workspace rather than only saying the folder is missing."""
    response = await served.api.post("/api/agents", json=SEED_EXAMPLE)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == "cwd"
    assert "proactive.workspace" in body["error"]
    assert "/workspace/my-project" in body["error"]


async def test_seed_004s_example_works_where_the_workspace_holds_its_folder(
    served: Served,
) -> None:
    """The same body with the folder inside the workspace, as a machine whose
    proactive.workspace is /workspace would have it."""
    (served.workspace / "my-project").mkdir(exist_ok=True)
    body = {**SEED_EXAMPLE, "cwd": str(served.workspace / "my-project")}
    response = await served.api.post("/api/agents", json=body)
    assert response.status_code == 201, response.text
    agent = response.json()["agent"]
    assert agent["cwd"] == str(served.workspace / "my-project")
    assert (await served.api.delete(f"/api/agents/{agent['id']}")).status_code in (200, 204)
