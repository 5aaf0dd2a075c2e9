"""`claybot cron ...` and `claybot heartbeat ...` against a real engine (and without one)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.cli.test_cli import cli
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow


def cron_list(engine_process: EngineProcess) -> dict[str, Any]:
    result = cli(engine_process.paths, "cron", "list", "--json")
    assert result.returncode == 0, result.stderr
    listing: dict[str, Any] = json.loads(result.stdout)
    return listing


def test_cron_commands_offline_then_online(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    added = cli(
        paths,
        "cron",
        "add",
        "--name",
        "Morning news",
        "--schedule",
        "0 7 * * *",
        "--timezone",
        "Europe/Paris",
        "--prompt",
        "Summarise the news.",
    )
    assert added.returncode == 0, added.stderr
    assert "the engine schedules it when it starts" in added.stdout
    [task] = cron_list(engine_process)["tasks"]
    assert (paths.home / "cron" / "morning-news" / "TASK.md").exists()
    assert cli(paths, "cron", "disable", task["taskId"]).returncode == 0
    bad = [
        cli(paths, "cron", "add", "--name", "x", "--schedule", "0 7 * *", "--prompt", "p"),
        cli(
            paths,
            "cron",
            "add",
            "--name",
            "x",
            "--schedule",
            "0 7 * * *",
            "--prompt",
            "p",
            "--timezone",
            "Nowhere/Land",
        ),
        cli(paths, "cron", "remove", "no-such-task", "--yes"),
    ]
    assert [r.returncode for r in bad] == [1, 1, 1]
    assert "5 fields" in bad[0].stderr and "unknown time zone" in bad[1].stderr
    assert "no cron task" in bad[2].stderr

    engine_process.start()
    [task] = cron_list(engine_process)["tasks"]
    assert task["enabled"] is False and task["nextRunAt"] is None
    assert cli(paths, "cron", "enable", task["taskId"]).returncode == 0
    [task] = cron_list(engine_process)["tasks"]
    assert task["enabled"] is True and task["nextRunAt"].endswith("+00:00")
    table = cli(paths, "cron", "list")
    assert "Morning news" in table.stdout and "Europe/Paris" in table.stdout
    ran = cli(paths, "cron", "run", task["taskId"])
    assert ran.returncode == 0 and f"cron:{task['taskId']}:" in ran.stdout
    with engine_process.client() as client:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            agents = client.get("/v1/engine/agents").json()["agents"]
            cron_agents = [a for a in agents if a["type"] == "cron"]
            if cron_agents:
                records = client.get(
                    f"/v1/engine/agents/{cron_agents[0]['agentId']}/history"
                ).json()["records"]
                if any(r["type"] == "assistant_message" for r in records):
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("the manual run did not reach the cron agent")
    assert "Summarise the news." in next(r["text"] for r in records if r["type"] == "user_message")
    unknown = cli(paths, "cron", "run", "nope")
    assert unknown.returncode == 1 and "no cron task" in unknown.stderr
    assert cli(paths, "cron", "remove", task["taskId"], "--yes").returncode == 0
    assert cron_list(engine_process)["tasks"] == []
    assert not (paths.home / "cron" / "morning-news").exists()


def test_heartbeat_commands(engine_process: EngineProcess) -> None:
    paths = engine_process.paths
    engine_process.start()
    added = cli(paths, "heartbeat", "add", "--title", "Check mail", "--prompt", "Anything new?")
    assert added.returncode == 0, added.stderr
    duplicate = cli(paths, "heartbeat", "add", "--title", "Check mail", "--prompt", "again")
    assert duplicate.returncode == 1 and "exists" in duplicate.stderr
    listing = json.loads(cli(paths, "heartbeat", "list", "--json").stdout)
    assert [t["id"] for t in listing["tasks"]] == ["check-mail"]
    assert cli(paths, "heartbeat", "run").returncode == 0
    with engine_process.client() as client:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tasks = client.get("/v1/engine/heartbeat/tasks").json()["tasks"]
            if tasks[0]["lastRunAt"]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the heartbeat did not run")
    assert "Check mail" in cli(paths, "heartbeat", "list").stdout
    assert cli(paths, "heartbeat", "remove", "check-mail", "--yes").returncode == 0
    missing = cli(paths, "heartbeat", "remove", "check-mail", "--yes")
    assert missing.returncode == 1 and "no heartbeat task" in missing.stderr
