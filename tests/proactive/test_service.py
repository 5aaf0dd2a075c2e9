"""The proactive service with the fake ``claude`` on a fake clock: runs, limits, lifecycle."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from claybot.config.settings import ProactiveSettings
from claybot.kernel.clock import from_ms, to_ms
from claybot.proactive.inputs import CreateAgentInput, UpdateAgentInput
from claybot.proactive.service import ServiceLimits
from tests.proactive.conftest import (
    START,
    FakeClaude,
    Harness,
    HarnessFactory,
    eventually,
    process_gone,
)

EVERY_MINUTE = "* * * * *"


def body(objective: str = "check the build", **fields: Any) -> CreateAgentInput:
    return CreateAgentInput.model_validate(
        {"name": "Builder", "objective": objective, "schedule": EVERY_MINUTE, **fields}
    )


def completions(h: Harness, agent_id: str | None = None) -> list[dict[str, Any]]:
    done = h.of_type("agent:execution:complete")
    return [m for m in done if agent_id is None or m["agentId"] == agent_id]


async def wait_completions(
    h: Harness, count: int, agent_id: str | None = None, timeout_s: float = 15
) -> None:
    await eventually(
        lambda: len(completions(h, agent_id)) >= count,
        timeout_s,
        f"{count} completed executions",
    )


def agent_dir(h: Harness, agent_id: str) -> Path:
    return h.root / "proactive" / agent_id


def state_on_disk(h: Harness, agent_id: str) -> dict[str, Any]:
    return dict(json.loads((agent_dir(h, agent_id) / "state.json").read_text()))


async def test_a_scheduled_run_streams_parsed_output_and_writes_its_three_files(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"})
    created = await h.service.create(body("GARBAGE then report", schedule="*/5 * * * *"))
    agent_id = created["id"]
    assert created["status"] == "active" and created["timezone"] == "UTC"
    assert from_ms(created["nextRunAt"]) == START.replace(minute=5, second=0)
    assert not fake_claude.runs()

    h.clock.set(START.replace(minute=5, second=0))
    await wait_completions(h, 1)

    [run] = fake_claude.runs()
    assert run["argv"] == [
        "-p", "GARBAGE then report", "--output-format", "stream-json", "--verbose",
    ]  # fmt: skip
    assert run["cwd"] == str(h.workspace.resolve())
    started = h.of_type("agent:execution:start")
    assert started == [
        {"agentId": agent_id, "executionId": started[0]["executionId"], "trigger": "schedule"}
    ]
    output = "".join(m["text"] for m in h.of_type("agent:output"))
    assert output == (
        "Working on: GARBAGE then report\nStreaming done.\nAll checks passed.\n"
    )  # the result line repeats the last message: said once
    [complete] = completions(h)
    assert complete["result"] == "success" and complete["executionId"] == started[0]["executionId"]

    executions = agent_dir(h, agent_id) / "executions"
    names = sorted(p.name for p in executions.iterdir())
    stamp = names[0].split(".")[0]
    assert names == [f"{stamp}.jsonl", f"{stamp}.log", f"{stamp}.result.json"]
    assert stamp == "2026-03-02T09-05-00-000Z"
    raw = (executions / f"{stamp}.jsonl").read_text().splitlines()
    assert json.loads(raw[0])["subtype"] == "init" and "this is not json" in raw
    assert (executions / f"{stamp}.log").read_text() == output
    result = json.loads((executions / f"{stamp}.result.json").read_text())
    assert result["result"] == "success" and result["exitCode"] == 0
    assert result["outputLines"] == 3 and "error" not in result
    for path in executions.iterdir():
        assert path.stat().st_mode & 0o777 == 0o600

    state = state_on_disk(h, agent_id)
    assert state["totalExecutions"] == 1 and state["lastResult"] == "success"
    assert from_ms(state["nextRunAt"]) == START.replace(minute=10, second=0)
    assert h.service.live_output(agent_id) == output


async def test_a_hanging_run_gets_sigterm_then_sigkill_after_five_seconds(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"})
    agent = await h.service.create(body("HANG forever", timeoutMs=1000))
    began = time.monotonic()
    await h.service.trigger(agent["id"])
    await eventually(lambda: bool(fake_claude.hanging_pids()), 10, "the run to hang")
    [pid] = fake_claude.hanging_pids()
    await wait_completions(h, 1, timeout_s=20)
    elapsed = time.monotonic() - began

    assert elapsed >= 1 + 5, "SIGKILL came only after the 5 s grace"
    assert elapsed < 1 + 5 + 4
    assert process_gone(pid)
    [result] = await h.service.executions(agent["id"], 10)
    assert result["result"] == "timeout" and result["exitCode"] is None
    assert result["error"] == "timed out after 1 s"
    assert h.service.detail(agent["id"])["consecutiveFailures"] == 1


async def test_failures_auto_pause_at_max_retries_and_resume_resets_them(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"})
    agent_id = (await h.service.create(body("FAIL please", maxRetries=2)))["id"]
    minute = START.replace(second=0)
    for n in (1, 2):
        h.clock.set(minute + timedelta(minutes=n))
        await wait_completions(h, n)
    detail = h.service.detail(agent_id)
    assert detail["status"] == "error" and detail["consecutiveFailures"] == 2
    assert detail["nextRunAt"] is None and detail["lastResult"] == "failure"
    [latest, _] = await h.service.executions(agent_id, 10)
    assert latest["error"] == "Exit code: 1: boom: the task failed"
    assert latest["exitCode"] == 1

    h.clock.set(minute + timedelta(minutes=3))  # auto-paused: the schedule no longer fires
    await eventually(lambda: h.service.running_count() == 0)
    assert len(fake_claude.runs()) == 2

    resumed = await h.service.resume(agent_id)
    assert resumed["status"] == "active" and resumed["consecutiveFailures"] == 0
    assert from_ms(resumed["nextRunAt"]) == minute + timedelta(minutes=4)
    assert state_on_disk(h, agent_id)["status"] == "active"


async def test_five_agents_due_at_once_never_run_more_than_two_at_a_time(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(
        env={"PATH": fake_claude.path, "HOME": "/tmp"}, limits=ServiceLimits(max_concurrent=2)
    )
    ids = [(await h.service.create(body(f"SLEEP=0.4 task {n}")))["id"] for n in range(5)]
    peak = 0

    def sample() -> bool:
        nonlocal peak
        peak = max(peak, h.service.running_count())
        return len(completions(h)) == 5

    h.clock.set(START.replace(second=0) + timedelta(minutes=1))
    await eventually(sample, 20, "five executions")
    runs = fake_claude.runs()
    assert len(runs) == 5 and peak == 2
    events = sorted([(r["start"], 1) for r in runs] + [(r["end"], -1) for r in runs])
    level = most = 0
    for _, step in events:
        level += step
        most = max(most, level)
    assert most == 2, "two ran together, never three"
    assert sorted(c["agentId"] for c in completions(h)) == sorted(ids)


async def test_a_manual_run_on_a_busy_agent_is_queued_and_a_tick_is_skipped(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"})
    agent_id = (await h.service.create(body("SLEEP=0.6 work")))["id"]
    first = await h.service.trigger(agent_id)
    assert first["status"] == "started"
    second = await h.service.trigger(agent_id)
    assert second["status"] == "queued" and second["position"] == 1
    assert h.service.detail(agent_id)["queuedRuns"] == 1
    assert state_on_disk(h, agent_id)["pendingRuns"] == [second["executionId"]]

    h.clock.set(START.replace(second=0) + timedelta(minutes=1))  # due while busy
    await eventually(lambda: bool(h.of_type("agent:skipped")))
    [skipped] = h.of_type("agent:skipped")
    assert skipped["agentId"] == agent_id and skipped["reason"] == "running"

    await wait_completions(h, 2)
    ran = [c["executionId"] for c in completions(h)]
    assert ran == [first["executionId"], second["executionId"]]
    assert len(fake_claude.runs()) == 2
    assert state_on_disk(h, agent_id)["pendingRuns"] == []


async def test_a_manual_run_on_a_paused_agent_runs_once_and_it_stays_paused(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"})
    agent_id = (await h.service.create(body("report")))["id"]
    paused = await h.service.pause(agent_id)
    assert paused["status"] == "paused" and paused["nextRunAt"] is None
    queued = await h.service.trigger(agent_id)
    await wait_completions(h, 1)
    assert completions(h)[0]["executionId"] == queued["executionId"]
    detail = h.service.detail(agent_id)
    assert detail["status"] == "paused" and detail["nextRunAt"] is None
    assert detail["totalExecutions"] == 1
    assert state_on_disk(h, agent_id)["status"] == "paused"


async def test_a_queued_manual_run_survives_a_restart(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    env = {"PATH": fake_claude.path, "HOME": "/tmp"}
    h = await harness_factory(env=env, limits=ServiceLimits(max_concurrent=1), kill_grace_s=0.5)
    busy = (await h.service.create(body("HANG")))["id"]
    waiting = (await h.service.create(body("report")))["id"]
    await h.service.trigger(busy)
    queued = await h.service.trigger(waiting)
    assert queued["status"] == "queued"
    await eventually(lambda: bool(fake_claude.hanging_pids()))

    h2 = await h.restart(env=env)  # the hanging run is killed, the queued one is kept
    await wait_completions(h2, 1)
    [done] = completions(h2)
    assert done["agentId"] == waiting and done["executionId"] == queued["executionId"]
    interrupted = (await h2.service.executions(busy, 10))[0]
    assert interrupted["error"].startswith("interrupted")
    assert h2.service.detail(busy)["consecutiveFailures"] == 0
    await h2.service.stop()


async def test_runs_missed_while_down_are_skipped_with_an_event(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    env = {"PATH": fake_claude.path, "HOME": "/tmp"}
    h = await harness_factory(env=env)
    agent_id = (await h.service.create(body("report", schedule="*/5 * * * *")))["id"]
    await h.service.stop()
    h.clock.set(START.replace(minute=17, second=0))  # 09:05, 09:10 and 09:15 went by

    h2 = await h.restart(env=env)
    try:
        [misfire] = h2.of_type("agent:misfire")
        assert misfire["agentId"] == agent_id and misfire["missedRuns"] == 3
        assert misfire["scheduledAt"] == to_ms(START.replace(minute=5, second=0))
        assert misfire["missedByMinutes"] == 12
        detail = h2.service.detail(agent_id)
        assert detail["missedRuns"] == 3
        assert from_ms(detail["nextRunAt"]) == START.replace(minute=20, second=0)
        await eventually(lambda: state_on_disk(h2, agent_id)["missedRuns"] == 3)
        assert not fake_claude.runs() and h2.service.running_count() == 0
    finally:
        await h2.service.stop()


async def test_the_run_sees_no_secret_from_the_engine_environment(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    secret = "sk-ant-api03-verysecretvalue0123456789"
    env = {
        "PATH": fake_claude.path,
        "HOME": "/home/owner",
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": secret,
        "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "CLAYBOT_HOME": "/srv/claybot",
        "SOME_RANDOM_THING": "x",
    }
    h = await harness_factory(env=env)
    agent_id = (await h.service.create(body("report")))["id"]
    await h.service.trigger(agent_id)
    await wait_completions(h, 1)
    seen = fake_claude.runs()[0]["env"]
    for name in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "CLAYBOT_HOME", "SOME_RANDOM_THING"):
        assert name not in seen
    assert secret not in json.dumps(seen)
    assert seen["HOME"] == "/home/owner" and seen["LANG"] == "C.UTF-8"
    assert seen["TERM"] == "dumb" and seen["PATH"] == fake_claude.path


async def test_shutdown_kills_the_running_process_and_saves_state(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"}, kill_grace_s=0.5)
    agent_id = (await h.service.create(body("HANG")))["id"]
    await h.service.trigger(agent_id)
    await eventually(lambda: bool(fake_claude.hanging_pids()))
    [pid] = fake_claude.hanging_pids()
    await h.service.stop()
    assert process_gone(pid)
    state = state_on_disk(h, agent_id)
    assert state["lastResult"] == "failure" and state["totalExecutions"] == 1
    assert state["status"] == "active" and state["consecutiveFailures"] == 0


async def test_delete_ends_the_run_stops_the_schedule_and_removes_the_files(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"}, kill_grace_s=0.5)
    doomed = (await h.service.create(body("HANG")))["id"]
    kept = (await h.service.create(body("report", schedule="0 0 1 1 *")))["id"]
    await h.service.trigger(doomed)
    await eventually(lambda: bool(fake_claude.hanging_pids()))
    [pid] = fake_claude.hanging_pids()
    await h.service.delete(doomed)
    assert process_gone(pid)
    assert not agent_dir(h, doomed).exists()
    manifest = json.loads((h.root / "proactive" / "manifest.json").read_text())
    assert manifest == {"version": 1, "agents": [kept]}
    h.clock.set(START.replace(second=0) + timedelta(minutes=1))
    await eventually(lambda: h.service.running_count() == 0)
    assert len(fake_claude.runs()) == 1
    assert [s["id"] for s in h.service.summaries()] == [kept]


async def test_schedules_follow_the_agents_time_zone_across_dst(
    harness_factory: HarnessFactory,
) -> None:
    h = await harness_factory()
    spring = await h.service.create(
        body("report", schedule="0 9 * * *", timezone="America/New_York")
    )
    # 2026-03-02 is EST (UTC-5); New York moves to EDT (UTC-4) on 2026-03-08.
    assert from_ms(spring["nextRunAt"]) == START.replace(hour=14, minute=0, second=0)
    h.clock.set(START.replace(day=8, hour=12))
    # The scheduler hears of the jump on its own task: the runs it missed are skipped and
    # the next is set. Wait for that (an update with the same schedule does not reschedule).
    await eventually(
        lambda: h.service.detail(spring["id"])["nextRunAt"] != spring["nextRunAt"],
        message="the missed runs to be skipped",
    )
    summer = START.replace(day=8, hour=13, minute=0, second=0)
    assert from_ms(h.service.detail(spring["id"])["nextRunAt"]) == summer
    moved = await h.service.update(spring["id"], UpdateAgentInput(schedule="0 9 * * *"))
    assert from_ms(moved["nextRunAt"]) == summer


async def test_runs_that_cannot_start_fail_with_a_reason(
    fake_claude: FakeClaude, harness_factory: HarnessFactory, tmp_path: Path
) -> None:
    h = await harness_factory(env={"PATH": "/nonexistent", "HOME": "/tmp"})
    agent_id = (await h.service.create(body("report")))["id"]
    await h.service.trigger(agent_id)
    await wait_completions(h, 1)
    [result] = await h.service.executions(agent_id, 5)
    assert result["result"] == "failure" and "not found on PATH" in result["error"]

    project = h.workspace / "project"
    project.mkdir()
    other = (await h.service.create(body("report", cwd="project")))["id"]
    assert h.service.detail(other)["cwd"] == str(project.resolve())
    os.rmdir(project)
    await h.service.trigger(other)
    await wait_completions(h, 1, agent_id=other)
    [gone] = await h.service.executions(other, 5)
    assert gone["result"] == "failure" and "does not exist" in gone["error"]


async def test_a_result_line_that_reports_an_error_is_a_failure(
    fake_claude: FakeClaude, harness_factory: HarnessFactory
) -> None:
    h = await harness_factory(env={"PATH": fake_claude.path, "HOME": "/tmp"})
    agent_id = (await h.service.create(body("ERROR_RESULT", model="haiku")))["id"]
    await h.service.trigger(agent_id)
    await wait_completions(h, 1)
    [result] = await h.service.executions(agent_id, 5)
    assert result["result"] == "failure" and "Credit balance too low" in result["error"]
    assert fake_claude.runs()[0]["argv"][-2:] == ["--model", "haiku"]


def test_the_default_time_zone_is_the_engines_unless_proactive_names_one() -> None:
    assert ServiceLimits.from_settings(ProactiveSettings(), "Europe/Paris").default_timezone == (
        "Europe/Paris"
    )
    named = ProactiveSettings.model_validate({"defaultTimezone": "Asia/Tokyo"})
    assert ServiceLimits.from_settings(named, "Europe/Paris").default_timezone == "Asia/Tokyo"
    with pytest.raises(ValidationError, match="unknown time zone"):
        ProactiveSettings.model_validate({"defaultTimezone": "Atlantis/Capital"})
