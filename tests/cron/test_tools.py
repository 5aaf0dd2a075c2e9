"""Cron tools through real agent turns: a user agent schedules, a cron agent keeps memory."""

from __future__ import annotations

from datetime import UTC, datetime

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from tests.agents.test_agents import next_event
from tests.agents.test_subagents import call, history, rules_settings
from tests.cron.fake_clock import FakeClock
from tests.cron.test_scheduler import start, write_task


async def test_a_user_agent_adds_reads_and_deletes_a_task(paths: HomePaths) -> None:
    rules = [
        {
            "match": "remind me",
            "response": call(
                "cron_add",
                name="Stand-up",
                schedule="0 9 * * 1-5",
                prompt="Time for stand-up.",
                timezone="Europe/Paris",
            ),
        },
        {
            "match": "created; next run",
            "response": call("cron_add", name="Broken", schedule="0 9 * *", prompt="x"),
        },
        {"match": "Invalid task", "response": call("cron_read_memory", taskId="nope")},
        {"match": "Unknown tool", "response": "Scheduled."},
        {"match": "what is scheduled", "response": call("cron_read_task")},
        {"match": "taskId is required", "response": "Which one?"},
    ]
    clock = FakeClock(datetime(2026, 5, 4, 6, 0, tzinfo=UTC))
    engine, events = await start(paths, clock, rules_settings(rules))
    try:
        posted = await engine.post_inbound(InboundMessage("local", "ann", "cli", "remind me"))
        await next_event(events, "agent.outgoing")
        [task] = engine.cron.tasks.values()
        upcoming = engine.cron.next_run(task.id)
        await engine.post_inbound(InboundMessage("local", "ann", "cli", "what is scheduled"))
        await next_event(events, "agent.outgoing", count=2)
        records = await history(engine, posted.agent_id)
    finally:
        await engine.stop()
    outputs = [r["output"] for r in records if r["type"] == "tool_result"]
    assert outputs[0]["text"].startswith(f"Cron task {task.id} created; next run 2026-05-04T07:00")
    assert outputs[1]["isError"] and "5 fields" in outputs[1]["text"]
    assert outputs[2] == {"text": "Unknown tool 'cron_read_memory'.", "isError": True}
    assert outputs[3]["isError"] and "taskId is required" in outputs[3]["text"]
    assert task.spec.name == "Stand-up" and task.schedule.timezone == "Europe/Paris"
    assert upcoming == datetime(2026, 5, 4, 7, 0, tzinfo=UTC)  # 09:00 in Paris (CEST)
    assert [e.payload["source"] for e in events if e.type == "cron.task.added"] == ["api"]


async def test_a_cron_agent_keeps_memory_between_runs(paths: HomePaths) -> None:
    rules = [
        {"match": "Count the runs", "response": call("cron_read_memory")},
        {"match": "No memory yet", "response": call("cron_write_memory", content="runs: 1")},
        {"match": "runs: 1", "response": call("cron_write_memory", content="runs: 2")},
        {"match": "MEMORY.md saved", "response": "Noted."},
    ]
    clock = FakeClock(datetime(2026, 5, 4, 9, 59, tzinfo=UTC))
    directory = write_task(paths, "counter", prompt="Count the runs.", schedule="0 * * * *")
    engine, events = await start(paths, clock, rules_settings(rules))
    try:
        clock.set(datetime(2026, 5, 4, 10, tzinfo=UTC))
        await next_event(events, "cron.task.ran")
        clock.set(datetime(2026, 5, 4, 11, tzinfo=UTC))
        ran = await next_event(events, "cron.task.ran", count=2)
        records = await history(engine, ran[0].payload["agentId"])
        offered = {tool.name for tool in engine.tools.visible_to("cron")}
    finally:
        await engine.stop()
    assert (directory / "MEMORY.md").read_text() == "runs: 2"
    assert {"cron_read_memory", "cron_write_memory"} <= offered
    state_dir = str((directory / "files").resolve())
    prompts = [r["text"] for r in records if r["type"] == "user_message"]
    assert len(prompts) == 2 and f"Files folder: {state_dir}" in prompts[0]
