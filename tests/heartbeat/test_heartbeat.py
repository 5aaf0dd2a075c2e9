"""The heartbeat in a real engine on a controlled clock: one batch, one call, one lastRunAt."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.providers.scripted import ScriptedProvider
from claybot.server.app import create_app
from tests.agents.test_agents import next_event, record_events
from tests.agents.test_subagents import history, rules_settings
from tests.conftest import write_settings
from tests.cron.fake_clock import FakeClock

START = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def write_task(paths: HomePaths, task_id: str, title: str, prompt: str, **extra: Any) -> None:
    folder = paths.home / "heartbeat"
    folder.mkdir(parents=True, exist_ok=True)
    front = {"title": title, **extra}
    lines = ["---", *(f"{key}: {json.dumps(value)}" for key, value in front.items()), "---"]
    (folder / f"{task_id}.md").write_text("\n".join(lines) + f"\n\n{prompt}\n")


async def start(
    paths: HomePaths, clock: FakeClock, reply: str = "HEARTBEAT_OK", delay_s: float = 0.0
) -> tuple[Engine, list[Event]]:
    settings = rules_settings(
        [
            {"match": "Heartbeat run", "response": reply},
            {"match": "Heartbeat report", "response": "Told the user."},
            {"match": "", "response": "hello"},
        ],
        delayS=delay_s,
    )
    settings["heartbeat"] = {"intervalS": 1800}
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0, clock=clock, watch_files=False))
    events = record_events(engine)
    await engine.start()
    return engine, events


def requests_of(engine: Engine) -> int:
    provider = engine.router.providers[0]
    assert isinstance(provider, ScriptedProvider)
    return sum("# Heartbeat run" in r.messages[-1].text for r in provider.requests)


async def in_the_model(engine: Engine, beats: int, timeout_s: float = 10) -> None:
    """Until ``beats`` heartbeat runs have reached the model (which may still be answering)."""
    async with asyncio.timeout(timeout_s):
        while requests_of(engine) < beats:
            await asyncio.sleep(0.005)


async def test_several_tasks_make_one_call_one_last_run_and_one_event_each(
    paths: HomePaths,
) -> None:
    write_task(paths, "inbox", "Check the inbox", "Anything urgent in the inbox?")
    write_task(paths, "calendar", "Check the calendar", "Meetings in the next hour?")
    write_task(paths, "backup", "Check backups", "Did last night's backup finish?")
    clock = FakeClock(START)
    engine, events = await start(paths, clock)  # never ran: the first beat is due now
    try:
        ran = await next_event(events, "heartbeat.task.ran", count=3)
        await asyncio.sleep(0.1)
        calls = requests_of(engine)
        agents = engine.agents.listings.agents()
        heartbeat_agent = next(a["agentId"] for a in agents if a["type"] == "heartbeat")
        records = await history(engine, heartbeat_agent)
        state = json.loads((paths.home / "heartbeat" / ".heartbeat-state.json").read_text())
        listing = await engine.heartbeat.listing()
    finally:
        await engine.stop()
    assert calls == 1
    assert sorted(e.payload["taskId"] for e in ran) == ["backup", "calendar", "inbox"]
    assert {e.payload["lastRunAt"] for e in ran} == {START.isoformat()}
    assert state == {"lastRunAt": int(START.timestamp() * 1000)}
    assert {task["lastRunAt"] for task in listing["tasks"]} == {START.isoformat()}
    assert listing["nextRunAt"] == (START + timedelta(minutes=30)).isoformat()
    [prompt] = [r["text"] for r in records if r["type"] == "user_message"]
    for title in ("## 1. Check backups", "## 2. Check the calendar", "## 3. Check the inbox"):
        assert title in prompt
    # Only the user agent would hear about it, and HEARTBEAT_OK is not forwarded.
    assert not [a for a in agents if a["type"] == "user"]


async def test_a_reply_that_needs_attention_goes_to_the_latest_conversation(
    paths: HomePaths,
) -> None:
    write_task(paths, "disk", "Disk space", "Is any disk above 90%?")
    clock = FakeClock(START)
    (paths.home / "heartbeat").mkdir(parents=True, exist_ok=True)
    (paths.home / "heartbeat" / ".heartbeat-state.json").write_text(
        json.dumps({"lastRunAt": int((START - timedelta(minutes=10)).timestamp() * 1000)})
    )
    engine, events = await start(paths, clock, reply="/var is at 93%.")
    try:
        posted = await engine.post_inbound(InboundMessage("local", "ann", "cli", "hi"))
        await next_event(events, "agent.outgoing")
        clock.set(START + timedelta(minutes=20))  # 30 minutes after the last beat
        await next_event(events, "heartbeat.task.ran")
        # Replies: the user's "hi", the heartbeat agent's report, the user agent passing it on.
        await next_event(events, "agent.outgoing", count=3)
        records = await history(engine, posted.agent_id)
    finally:
        await engine.stop()
    reports = [r for r in records if r.get("origin") == "heartbeat"]
    assert [r["text"] for r in reports] == ["Heartbeat report:\n/var is at 93%."]


async def test_a_beat_due_while_one_runs_is_deferred_not_doubled(paths: HomePaths) -> None:
    write_task(paths, "slow", "Slow check", "Take your time.")
    clock = FakeClock(START)
    engine, events = await start(paths, clock, delay_s=0.4)
    try:
        await in_the_model(engine, beats=1)
        engine.heartbeat.run_now()
        await next_event(events, "heartbeat.deferred")
        ran = await next_event(events, "heartbeat.task.ran", count=2, timeout_s=10)
        calls = requests_of(engine)
    finally:
        await engine.stop()
    assert calls == 2 and len(ran) == 2


async def test_gates_leave_tasks_out_and_no_tasks_means_no_call(paths: HomePaths) -> None:
    write_task(paths, "never", "Never", "Should not be asked.", gate={"command": "exit 1"})
    write_task(paths, "quiet", "Quiet", "Also not.", gate={"command": "false"})
    clock = FakeClock(START)
    engine, events = await start(paths, clock)
    try:
        skipped = await next_event(events, "heartbeat.task.skipped", count=2)
        await asyncio.sleep(0.1)
        calls = requests_of(engine)
        last = engine.heartbeat.last_run_at
    finally:
        await engine.stop()
    assert calls == 0 and last == START
    assert {e.payload["taskId"] for e in skipped} == {"never", "quiet"}
    assert not [e for e in events if e.type == "heartbeat.task.ran"]


async def test_a_restart_during_a_beat_finishes_it_once(paths: HomePaths) -> None:
    write_task(paths, "one", "One", "Check one thing.")
    clock = FakeClock(START)
    engine, events = await start(paths, clock, delay_s=30)
    await in_the_model(engine, beats=1)
    await engine.stop(drain_timeout_s=0.1)
    engine, events = await start(paths, clock)
    try:
        await next_event(events, "heartbeat.task.ran")
        await asyncio.sleep(0.2)
        agents = engine.agents.listings.agents()
        heartbeat_agent = next(a["agentId"] for a in agents if a["type"] == "heartbeat")
        records = await history(engine, heartbeat_agent)
    finally:
        await engine.stop()
    prompts = [r for r in records if r["type"] == "user_message"]
    assert [p["messageId"] for p in prompts] == [f"heartbeat:{int(START.timestamp() * 1000)}"]
    assert sum(1 for r in records if r["type"] == "assistant_message" and r["final"]) == 1


async def test_the_api_adds_lists_runs_and_removes_tasks(paths: HomePaths) -> None:
    clock = FakeClock(START)
    engine, events = await start(paths, clock)
    transport = httpx.ASGITransport(app=create_app(engine))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as api:
            added = await api.post(
                "/v1/engine/heartbeat/tasks",
                json={"title": "Water the plants", "prompt": "Remind me if it is Monday."},
            )
            again = await api.post(
                "/v1/engine/heartbeat/tasks",
                json={"title": "Water the plants", "prompt": "x"},
            )
            bad = [
                await api.post("/v1/engine/heartbeat/tasks", json={"title": "x"}),
                await api.post(
                    "/v1/engine/heartbeat/tasks", json={"title": "x", "prompt": "y", "id": "../x"}
                ),
                await api.post(
                    "/v1/engine/heartbeat/tasks",
                    json={"title": "x", "prompt": "y", "gate": {"command": ""}},
                ),
                await api.post("/v1/engine/heartbeat/run", json={"ids": "all"}),
            ]
            listed = (await api.get("/v1/engine/heartbeat/tasks")).json()
            run = await api.post("/v1/engine/heartbeat/run", json={"ids": ["water-the-plants"]})
            await next_event(events, "heartbeat.task.ran")
            removed = await api.delete("/v1/engine/heartbeat/tasks/water-the-plants")
            missing = await api.delete("/v1/engine/heartbeat/tasks/water-the-plants")
    finally:
        await engine.stop()
    assert added.status_code == 201 and added.json()["task"]["id"] == "water-the-plants"
    assert again.status_code == 409
    assert [r.status_code for r in bad] == [422, 422, 422, 422]
    assert [t["id"] for t in listed["tasks"]] == ["water-the-plants"]
    assert run.status_code == 202 and removed.status_code == 200
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "taskId"
