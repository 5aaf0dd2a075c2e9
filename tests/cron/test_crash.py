"""A cron run survives SIGKILL at any moment: after a restart it happens exactly once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.agents.test_subagents import rules_settings
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow


def cron_history(process: EngineProcess) -> list[dict[str, Any]]:
    with process.client() as client:
        agents = client.get("/v1/engine/agents").json()["agents"]
        cron = [a for a in agents if a["type"] == "cron"]
        if not cron:
            return []
        history = client.get(f"/v1/engine/agents/{cron[0]['agentId']}/history")
        records: list[dict[str, Any]] = history.json()["records"]
        return records


@pytest.mark.parametrize("kill_after_s", [0.0, 0.15, 0.6])
def test_a_run_killed_mid_way_finishes_once_after_restart(
    paths: HomePaths, kill_after_s: float
) -> None:
    write_settings(paths, rules_settings([{"match": "Tidy up", "response": "Tidied."}], delayS=0.5))
    process = EngineProcess(paths)
    process.start()
    try:
        with process.client() as client:
            task = client.post(
                "/v1/engine/cron/tasks",
                json={"name": "Tidy", "schedule": "0 3 1 1 *", "prompt": "Tidy up."},
            ).json()["task"]
            run = client.post(f"/v1/engine/cron/tasks/{task['taskId']}/run").json()
        time.sleep(kill_after_s)
        process.kill()
        process.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            records = cron_history(process)
            if any(r.get("text") == "Tidied." for r in records):
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the run never finished: {records}")
        time.sleep(1.0)  # a second run would have been posted and answered by now
        records = cron_history(process)
        with process.client() as client:
            listed = client.get("/v1/engine/cron/tasks").json()["tasks"]
    finally:
        process.terminate()
    prompts = [r for r in records if r["type"] == "user_message"]
    assert [p["messageId"] for p in prompts] == [run["messageId"]]
    assert sum(r.get("text") == "Tidied." for r in records) == 1
    assert listed[0]["lastRun"]["status"] == "ran" and listed[0]["running"] is False
