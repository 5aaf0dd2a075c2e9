"""Cron tasks in a real engine on a clock the test controls."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.providers.scripted import ScriptedProvider
from tests.agents.test_agents import next_event, record_events
from tests.agents.test_subagents import history, rules_settings
from tests.conftest import write_settings
from tests.cron.fake_clock import FakeClock


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def write_task(paths: HomePaths, slug: str, prompt: str = "Do the thing.", **front: Any) -> Path:
    directory = paths.home / "cron" / slug
    (directory / "files").mkdir(parents=True, exist_ok=True)
    fields = {"taskId": slug, "name": slug, **front}
    lines = ["---", *(f"{key}: {json.dumps(value)}" for key, value in fields.items()), "---"]
    (directory / "TASK.md").write_text("\n".join(lines) + f"\n\n{prompt}\n")
    return directory


async def start(
    paths: HomePaths, clock: FakeClock, settings: dict[str, Any] | None = None
) -> tuple[Engine, list[Event]]:
    write_settings(paths, settings or rules_settings([{"match": "", "response": "done"}]))
    engine = Engine(paths, EngineOptions(port=0, clock=clock, watch_files=False))
    events = record_events(engine)
    await engine.start()
    return engine, events


def of_type(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [event.payload for event in events if event.type == kind]


async def wait_until(predicate: Any, timeout_s: float = 10) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


@pytest.mark.parametrize(
    ("zone", "schedule", "start_at", "expected"),
    [
        # Spring forward: 02:30 does not exist on the transition day and runs once, at 03:00.
        (
            "Europe/Berlin",
            "30 2 * * *",
            utc(2026, 3, 28, 2),
            ["2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"],
        ),
        (
            "America/New_York",
            "30 2 * * *",
            utc(2026, 3, 7, 8),
            ["2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"],
        ),
        # Fall back: 01:30/02:30 happen twice on the transition day and run once.
        (
            "Europe/Berlin",
            "30 2 * * *",
            utc(2026, 10, 24, 2),
            ["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            utc(2026, 10, 31, 8),
            ["2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"],
        ),
    ],
)
async def test_runs_across_dst_transitions_happen_once_at_the_right_instant(
    paths: HomePaths, zone: str, schedule: str, start_at: datetime, expected: list[str]
) -> None:
    clock = FakeClock(start_at)
    write_task(paths, "nightly", schedule=schedule, timezone=zone)
    engine, events = await start(paths, clock)
    try:
        for count in (1, 2):
            upcoming = engine.cron.next_run("nightly")
            assert upcoming is not None
            clock.set(upcoming - timedelta(seconds=1))  # just before: nothing fires
            await asyncio.sleep(0.05)
            assert len(of_type(events, "cron.task.started")) == count - 1
            clock.set(upcoming)
            await next_event(events, "cron.task.ran", count=count)
        # An hour later (the repeated hour on fall-back day), nothing runs again.
        clock.advance(timedelta(hours=1, minutes=1))
        await asyncio.sleep(0.05)
    finally:
        await engine.stop()
    assert [p["scheduledAt"] for p in of_type(events, "cron.task.ran")] == expected
    assert all(p["status"] == "ran" for p in of_type(events, "cron.task.ran"))
    assert all(p["latenessMs"] < 1000 for p in of_type(events, "cron.task.started"))


async def test_a_restart_in_the_middle_of_a_run_does_not_run_it_twice(paths: HomePaths) -> None:
    clock = FakeClock(utc(2026, 5, 4, 9, 59, 30))
    write_task(paths, "report", prompt="Write the report.", schedule="0 10 * * *")
    slow = rules_settings([{"match": "Write the report", "response": "Report written."}], delayS=30)
    engine, events = await start(paths, clock, slow)
    clock.set(utc(2026, 5, 4, 10, 0, 0, 200_000))
    await next_event(events, "cron.task.started")
    model = engine.router.providers[0]
    assert isinstance(model, ScriptedProvider)
    await wait_until(lambda: model.requests)  # the model is working on it
    await engine.stop(drain_timeout_s=0.1)  # the turn is cut off, like a crash
    fast = rules_settings([{"match": "Write the report", "response": "Report written."}])
    engine, events = await start(paths, clock, fast)
    try:
        ran = await next_event(events, "cron.task.ran")
        agent_id = ran[0].payload["agentId"]
        records = await history(engine, agent_id)
    finally:
        await engine.stop()
    assert of_type(events, "cron.task.started") == []  # resumed, not started again
    prompts = [r for r in records if r["type"] == "user_message"]
    assert [p["messageId"] for p in prompts] == [
        f"cron:report:{int(utc(2026, 5, 4, 10).timestamp() * 1000)}"
    ]
    answers = [r for r in records if r["type"] == "assistant_message" and r["final"]]
    assert [a["text"] for a in answers] == ["Report written."]


@pytest.mark.parametrize(
    ("misfire", "runs"), [("skip", []), ("run-once", ["2026-05-04T15:00:00+00:00"])]
)
async def test_runs_missed_while_down_follow_the_misfire_policy(
    paths: HomePaths, misfire: str, runs: list[str]
) -> None:
    clock = FakeClock(utc(2026, 5, 4, 10, 30))
    write_task(paths, "hourly", schedule="0 * * * *", misfire=misfire)
    engine, _ = await start(paths, clock)
    await engine.stop()
    clock.set(utc(2026, 5, 4, 15, 30))  # down for 11:00, 12:00, 13:00, 14:00 and 15:00
    engine, events = await start(paths, clock)
    try:
        await next_event(events, "cron.task.skipped")
        if runs:
            await next_event(events, "cron.task.ran")
        await asyncio.sleep(0.1)
        upcoming = engine.cron.next_run("hourly")
    finally:
        await engine.stop()
    assert [p["scheduledAt"] for p in of_type(events, "cron.task.ran")] == runs
    [skipped] = of_type(events, "cron.task.skipped")
    assert skipped["reason"] == "missed"
    assert len(skipped["scheduledAt"]) == 5 - len(runs)
    assert upcoming == utc(2026, 5, 4, 16)


@pytest.mark.parametrize("overlap", ["skip", "queue"])
async def test_overlap_skips_or_queues_a_run_while_the_last_one_is_busy(
    paths: HomePaths, overlap: str
) -> None:
    clock = FakeClock(utc(2026, 5, 4, 10, 0, 30))
    write_task(paths, "minutely", schedule="* * * * *", overlap=overlap)
    slow = rules_settings([{"match": "", "response": "done"}], delayS=0.5)
    engine, events = await start(paths, clock, slow)
    try:
        clock.set(utc(2026, 5, 4, 10, 1))
        await next_event(events, "cron.task.started")
        clock.set(utc(2026, 5, 4, 10, 2))  # the 10:01 run is still busy
        if overlap == "skip":
            await next_event(events, "cron.task.skipped")
            await next_event(events, "cron.task.ran")
        else:
            await next_event(events, "cron.task.ran", count=2)
    finally:
        await engine.stop()
    ran = [p["scheduledAt"] for p in of_type(events, "cron.task.ran")]
    if overlap == "skip":
        assert ran == ["2026-05-04T10:01:00+00:00"]
        assert of_type(events, "cron.task.skipped")[0]["reason"] == "overlap"
    else:
        assert ran == ["2026-05-04T10:01:00+00:00", "2026-05-04T10:02:00+00:00"]


async def test_a_gate_blocks_or_passes_its_output_on(paths: HomePaths) -> None:
    clock = FakeClock(utc(2026, 5, 4, 9, 59))
    write_task(paths, "blocked", schedule="0 10 * * *", gate={"command": "echo nope; exit 3"})
    write_task(paths, "passing", schedule="0 10 * * *", gate={"command": "echo 'disk at 91%'"})
    engine, events = await start(paths, clock)
    try:
        clock.set(utc(2026, 5, 4, 10))
        await next_event(events, "cron.task.skipped")
        ran = await next_event(events, "cron.task.ran")
        records = await history(engine, ran[0].payload["agentId"])
    finally:
        await engine.stop()
    [skipped] = of_type(events, "cron.task.skipped")
    assert skipped["taskId"] == "blocked" and skipped["reason"] == "gate"
    assert "exited with 3" in skipped["detail"] and skipped["output"] == "nope"
    assert [p["taskId"] for p in of_type(events, "cron.task.ran")] == ["passing"]
    prompt = next(r["text"] for r in records if r["type"] == "user_message")
    assert prompt.endswith("Do the thing.\n\n[Gate output]\ndisk at 91%")


async def test_an_invalid_task_file_is_reported_and_the_others_still_run(paths: HomePaths) -> None:
    clock = FakeClock(utc(2026, 5, 4, 9, 59))
    write_task(paths, "good", schedule="0 10 * * *")
    write_task(paths, "bad-zone", schedule="0 10 * * *", timezone="Mars/Olympus")
    (paths.home / "cron" / "no-front").mkdir(parents=True)
    (paths.home / "cron" / "no-front" / "TASK.md").write_text("just text\n")
    engine, events = await start(paths, clock)
    try:
        listed = engine.cron.listing()
        problems = {p.path: p.reason for p in engine.cron.problems}
        clock.set(utc(2026, 5, 4, 10))
        await next_event(events, "cron.task.ran")
    finally:
        await engine.stop()
    assert [task["taskId"] for task in listed] == ["good"]
    assert "unknown time zone 'Mars/Olympus'" in problems[str(paths.home / "cron/bad-zone/TASK.md")]
    assert "no front matter" in problems[str(paths.home / "cron/no-front/TASK.md")]
    assert len(of_type(events, "cron.task.invalid")) == 2


async def test_an_edited_task_file_is_picked_up_without_a_restart(paths: HomePaths) -> None:
    clock = FakeClock(utc(2026, 5, 4, 9))
    directory = write_task(paths, "edited", schedule="0 10 * * *")
    write_settings(paths, rules_settings([{"match": "", "response": "done"}]))
    engine = Engine(paths, EngineOptions(port=0, clock=clock))  # watching files
    events = record_events(engine)
    await engine.start()
    try:
        assert engine.cron.next_run("edited") == utc(2026, 5, 4, 10)
        await asyncio.sleep(0.3)  # the watcher is up
        write_task(paths, "edited", schedule="30 9 * * *")
        await next_event(events, "cron.task.updated", timeout_s=10)
        updated = engine.cron.next_run("edited")
        write_task(paths, "newcomer", schedule="15 9 * * *")  # a folder that appears
        added = await next_event(events, "cron.task.added", timeout_s=10)
        copy = write_task(paths, "copy", schedule="15 9 * * *")
        (copy / "TASK.md").write_text((paths.home / "cron/newcomer/TASK.md").read_text())
        duplicate = await next_event(events, "cron.task.invalid", timeout_s=10)
        (directory / "TASK.md").write_text("---\nname: broken\n---\n")
        invalid = await next_event(events, "cron.task.invalid", count=2, timeout_s=10)
        removed = await next_event(events, "cron.task.removed", timeout_s=10)
    finally:
        await engine.stop()
    assert updated == utc(2026, 5, 4, 9, 30)
    assert added[0].payload == {"taskId": "newcomer", "name": "newcomer", "source": "file"}
    assert "taskId newcomer is also in" in duplicate[0].payload["reason"]
    assert "taskId" in invalid[1].payload["reason"]
    assert removed[0].payload["taskId"] == "edited"


async def test_a_run_for_a_missing_agent_fails_and_the_others_still_run(paths: HomePaths) -> None:
    clock = FakeClock(utc(2026, 5, 4, 9, 59))
    write_task(paths, "lost", schedule="0 10 * * *", agentId="no-such-agent")
    write_task(paths, "fine", schedule="0 10 * * *")
    engine, events = await start(paths, clock)
    try:
        clock.set(utc(2026, 5, 4, 10))
        await next_event(events, "cron.task.ran", count=2)
    finally:
        await engine.stop()
    ran = {p["taskId"]: p for p in of_type(events, "cron.task.ran")}
    assert ran["fine"]["status"] == "ran"
    assert ran["lost"]["status"] == "failed" and "no-such-agent" in ran["lost"]["error"]
