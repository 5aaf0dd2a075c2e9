"""Background side tasks survive a crash: the idle sweeper fails once and keeps working."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from tests.agents.test_agents import next_event, post
from tests.conftest import ECHO_SETTINGS, running_engine, write_settings

SIDE_TASKS = {"agents-idle-sweeper", "agents-state-flush", "agents-checkpoint"}


async def side_tasks(api: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await api.get("/v1/engine/status")
    assert response.status_code == 200, response.text
    return {task["name"]: task for task in response.json()["sideTasks"]}


async def test_the_idle_sweeper_is_restarted_after_a_crash_and_unloads_again(
    paths: HomePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_settings(paths, {**ECHO_SETTINGS, "agents": {"idleUnloadS": 0}})
    async with running_engine(paths) as (engine, api, events):
        before = await side_tasks(api)
        assert set(before) == SIDE_TASKS
        assert all(task["running"] and task["restarts"] == 0 for task in before.values())

        unload_idle = engine.agents.residency.unload_idle
        calls = 0

        async def fails_once(**kwargs: Any) -> int:
            nonlocal calls
            calls += 1
            if calls == 1:  # an error the sweep does not expect (it handles OSError itself)
                raise RuntimeError("simulated fault in the sweep")
            return await unload_idle(**kwargs)

        monkeypatch.setattr(engine.agents.residency, "unload_idle", fails_once)
        async with asyncio.timeout(10):
            while (sweeper := (await side_tasks(api))["agents-idle-sweeper"])["restarts"] < 1:
                await asyncio.sleep(0.01)
        assert sweeper["running"] is True
        assert sweeper["lastError"] == "RuntimeError: simulated fault in the sweep"
        assert sweeper["lastFailureAt"].endswith("Z")
        others = await side_tasks(api)
        assert all(others[name]["restarts"] == 0 for name in SIDE_TASKS - {sweeper["name"]})

        # Idle unloading still happens: a new agent answers, then the sweeper unloads it.
        posted = await post(api, "hello after the crash")
        await next_event(events, "agent.outgoing")
        [sleep] = await next_event(events, "agent.sleep")
        assert sleep.payload == {"agentId": posted["agentId"], "reason": "idle"}
        assert calls >= 2
