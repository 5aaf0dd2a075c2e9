"""``claybot proactive`` and the TCP door against a real engine process with the fake claude."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from claybot.config.home import HomePaths
from tests.cli.test_cli import cli
from tests.conftest import ECHO_SETTINGS, EngineProcess, write_settings
from tests.proactive.conftest import FakeClaude, install_fake_claude, process_gone

pytestmark = pytest.mark.slow


@pytest.fixture
def fake(tmp_path: Path) -> FakeClaude:
    return install_fake_claude(tmp_path / "fake")


@pytest.fixture
def engine(paths: HomePaths, fake: FakeClaude) -> Iterator[EngineProcess]:
    write_settings(paths, ECHO_SETTINGS)
    process = EngineProcess(paths, {"PATH": fake.path, "MY_SERVICE_PASSWORD": "hunter2hunter2"})
    process.start()
    yield process
    if process.process is not None and process.process.poll() is None:
        process.kill()


def ok(paths: HomePaths, *args: str) -> str:
    result = cli(paths, "proactive", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_cli_manages_and_runs_proactive_agents(engine: EngineProcess, fake: FakeClaude) -> None:
    paths = engine.paths
    assert "no proactive agents" in ok(paths, "list")
    created = json.loads(
        ok(paths, "create", "--name", "Nightly", "--objective", "report status",
           "--schedule", "0 3 * * *", "--timezone", "Europe/Paris", "--json")
    )["agent"]  # fmt: skip
    agent_id = created["id"]
    assert created["timezone"] == "Europe/Paris" and created["runner"] == "claude"
    [listed] = json.loads(ok(paths, "list", "--json"))["agents"]
    assert listed["id"] == agent_id and listed["status"] == "active"
    assert "Nightly" in ok(paths, "list")

    # A schedule that cannot come due while the test runs (midnight of a leap day): with
    # "*/10" a ten-minute boundary during the test added a scheduled run to the manual one.
    assert "updated" in ok(paths, "edit", agent_id, "--schedule", "0 0 29 2 *")
    assert json.loads(ok(paths, "list", "--json"))["agents"][0]["schedule"] == "0 0 29 2 *"
    nothing = cli(paths, "proactive", "edit", agent_id)
    assert nothing.returncode == 1 and "nothing to change" in nothing.stderr

    log = ok(paths, "run", agent_id, "--wait")
    assert log == "Working on: report status\nStreaming done.\nAll checks passed.\n"
    assert ok(paths, "logs", agent_id) == log
    [execution] = json.loads(ok(paths, "logs", agent_id, "--list", "--json"))["executions"]
    assert execution["result"] == "success" and execution["trigger"] == "manual"
    assert execution["executionId"] in ok(paths, "logs", agent_id, "--list")
    # The engine's own secret never reaches the run.
    assert "MY_SERVICE_PASSWORD" not in fake.runs()[0]["env"]

    assert "paused" in ok(paths, "pause", agent_id)
    assert json.loads(ok(paths, "list", "--json"))["agents"][0]["nextRunAt"] is None
    assert "resumed" in ok(paths, "resume", agent_id)

    outside = cli(paths, "proactive", "create", "--name", "x", "--objective", "o",
                  "--schedule", "* * * * *", "--cwd", "/etc")  # fmt: skip
    assert outside.returncode == 1 and "cwd '/etc' is outside the workspace" in outside.stderr
    failing = json.loads(
        ok(paths, "create", "--name", "Broken", "--objective", "FAIL now",
           "--schedule", "0 0 1 1 *", "--json")
    )["agent"]  # fmt: skip
    failed = cli(paths, "proactive", "run", failing["id"], "--wait")
    assert failed.returncode == 1 and "Exit code: 1: boom" in failed.stderr
    # --json: the execution, and `ok` says what the exit code says.
    waited = json.loads(ok(paths, "run", agent_id[:8], "--wait", "--json"))
    assert waited["ok"] is True and waited["agentId"] == agent_id
    assert waited["execution"]["result"] == "success"
    failed = cli(paths, "proactive", "run", failing["id"], "--wait", "--json")
    answer = json.loads(failed.stdout)
    assert failed.returncode == 1 and answer["ok"] is False
    assert answer["error"]["code"] == "run_failed" and "boom" in answer["error"]["message"]
    assert answer["execution"]["result"] != "success"
    plain = cli(paths, "proactive", "logs", agent_id, "--json")
    assert (
        plain.returncode == 1
        and "--json goes with --list" in json.loads(plain.stdout)["error"]["message"]
    )

    assert "deleted" in ok(paths, "delete", agent_id, "--yes")
    assert [a["id"] for a in json.loads(ok(paths, "list", "--json"))["agents"]] == [failing["id"]]
    gone = cli(paths, "proactive", "logs", agent_id)
    assert gone.returncode == 1 and "no proactive agent" in gone.stderr
    assert not (paths.home / "proactive" / agent_id).exists()


def test_stopping_the_engine_kills_a_hanging_run_and_saves_its_state(
    engine: EngineProcess, fake: FakeClaude
) -> None:
    paths = engine.paths
    agent = json.loads(
        ok(paths, "create", "--name", "Stuck", "--objective", "HANG", "--schedule", "0 0 1 1 *",
           "--json")
    )["agent"]  # fmt: skip
    assert "started" in ok(paths, "run", agent["id"])
    deadline = time.monotonic() + 10
    while not fake.hanging_pids():
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)
    [pid] = fake.hanging_pids()
    began = time.monotonic()
    assert engine.terminate(timeout_s=30) == 0
    assert time.monotonic() - began >= 5, "SIGKILL only after the grace period"
    assert process_gone(pid)
    state = json.loads((paths.home / "proactive" / agent["id"] / "state.json").read_text())
    assert state["totalExecutions"] == 1 and state["lastResult"] == "failure"
    [result] = (paths.home / "proactive" / agent["id"] / "executions").glob("*.result.json")
    assert "interrupted" in json.loads(result.read_text())["error"]


def create_key(engine: EngineProcess, scopes: list[str]) -> str:
    deadline = time.monotonic() + 15
    with engine.client() as client:
        while True:
            response = client.post(
                "/v1/engine/keys", json={"name": "t", "scopes": scopes, "rateLimitRpm": 600}
            )
            if response.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the database opens after the socket
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


def test_on_tcp_reads_and_the_websocket_need_agents_read_and_changes_agents_write(
    engine: EngineProcess,
) -> None:
    with engine.client() as client:
        port = client.get("/v1/engine/status").json()["tcp"]["port"]
    reader = create_key(engine, ["agents:read"])
    writer = create_key(engine, ["agents:write"])
    jobs = create_key(engine, ["jobs:read"])
    base = f"127.0.0.1:{port}"

    def auth(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    body = {"name": "tcp", "objective": "o", "schedule": "0 0 1 1 *"}
    with httpx.Client(base_url=f"http://{base}", timeout=10) as tcp:
        assert tcp.get("/api/agents", headers=auth(reader)).status_code == 200
        assert tcp.get("/api/agents", headers=auth(jobs)).status_code == 403
        assert tcp.post("/api/agents", json=body, headers=auth(reader)).status_code == 403
        assert tcp.post("/api/agents", json=body, headers=auth(writer)).status_code == 201

    async def websocket(key: str | None) -> dict[str, object]:
        headers = auth(key) if key else {}
        async with connect(f"ws://{base}/api/agents/ws", additional_headers=headers) as ws:
            return dict(json.loads(await ws.recv()))

    first = asyncio.run(websocket(reader))
    assert first["type"] == "agent:list"
    for key, status in ((None, 401), (jobs, 403)):
        with pytest.raises(InvalidStatus) as refused:
            asyncio.run(websocket(key))
        assert refused.value.response.status_code == status
