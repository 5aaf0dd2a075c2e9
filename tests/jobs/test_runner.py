"""A job's run, end to end over the store: plan approval, the respond texts, artifacts,
rejection, the time limit, cancelling, and resuming on another worker."""

from __future__ import annotations

import asyncio
import glob
import json
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from claybot.agents.records import HistoryRecord, NoteRecord, ToolResultRecord, UserMessageRecord
from claybot.config.settings import ProviderSettings
from claybot.jobs.database import JobDatabase
from claybot.jobs.mcp_servers import list_tools
from claybot.jobs.model import Claim, HitlMode, JobStatus, LeaseLost, NewJob, response_text
from claybot.jobs.registry import NewServer
from claybot.jobs.runner import JobRunner, RunLimits, Stop, StopSignal
from claybot.providers.scripted import ScriptedProvider
from claybot.sandbox import DEFAULT_LIMITS, Sandbox, SandboxConfig, SandboxMode
from tests.jobs.conftest import Clock
from tests.jobs.egress_probe import (
    PUBLIC_HOST,
    Plan,
    assert_public_reached,
    connections_seen,
    public_proxy,
    public_server,
    refused_by_the_proxy,
    report_of,
    silent_listener,
)

PLAN = json.dumps(
    {
        "type": "plan",
        "plan": "## Proposed Plan\n\n1. Write report.md",
        "question": "Should I proceed with this plan?",
    }
)
WRITE_A = {"name": "write_file", "arguments": {"filename": "a.txt", "content": "A"}}
DONE = {"name": "final_answer", "arguments": {"answer": "done"}}
PLAN_2 = json.dumps({"type": "plan", "plan": "## Plan v2\n\n1. Write report.md", "question": "OK?"})


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def rules(*pairs: tuple[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(
        ProviderSettings(
            id="scripted",
            model="rules",
            options={"rules": [{"match": m, "response": r} for m, r in pairs]},
        )
    )


PLANNING = rules(
    ("Task:", {"text": "", "toolCalls": [call("ask_user", question=PLAN)]}),
    ("[PLAN EDITED]", {"text": "", "toolCalls": [call("ask_user", question=PLAN_2)]}),
    (
        "[PLAN APPROVED]",
        {
            "text": "Writing it.",
            "toolCalls": [call("write_file", filename="report.md", content="# Stars\n")],
        },
    ),
    ("report.md", {"text": "", "toolCalls": [call("final_answer", answer="The report is ready.")]}),
    (
        "[PLAN REJECTED]",
        {"text": "", "toolCalls": [call("final_answer", answer="Stopped as asked.")]},
    ),
)


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    box = Sandbox(tmp_path / "home", environ={"PATH": "/usr/bin:/bin"})
    yield box
    await box.close()


def runner_for(
    db: JobDatabase, provider: ScriptedProvider, sandbox: Sandbox, tmp_path: Path
) -> JobRunner:
    return JobRunner(
        db,
        lambda _model: provider,
        sandbox.runner("jobs", SandboxConfig("auto", DEFAULT_LIMITS)),
        tmp_path / "work",
        RunLimits(max_iterations=10, python_timeout_s=30),
    )


async def run_once(
    db: JobDatabase, runner: JobRunner, worker: str = "w1"
) -> tuple[Claim, JobStatus | None]:
    claim = await db.jobs.claim(worker)
    assert claim is not None
    return claim, await runner.run(claim, StopSignal())


def tool_results(records: Sequence[HistoryRecord], name: str) -> list[str]:
    return [
        r.output.text for r in records if isinstance(r, ToolResultRecord) and r.toolName == name
    ]


def kinds(records: Sequence[HistoryRecord]) -> list[str]:
    """The records' types, as their rows name them."""
    return [str(r.__struct_config__.tag) for r in records]


async def test_plan_approval_edit_then_approve_writes_the_artifact_and_completes(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    runner = runner_for(jobs_db, PLANNING, sandbox, tmp_path)
    job = await jobs_db.jobs.create(NewJob("Write a report about stars"))
    _, status = await run_once(jobs_db, runner)
    assert status is JobStatus.WAITING_FOR_USER
    waiting = await jobs_db.jobs.get(job.id)
    assert json.loads(waiting.agent_question or "") == json.loads(PLAN)
    assert waiting.worker_id is None and waiting.execution_state is not None

    edited = response_text("edit", "shorter please", "## Plan v2")
    await jobs_db.jobs.respond(job.id, edited)
    _, status = await run_once(jobs_db, runner, "w2")
    assert status is JobStatus.WAITING_FOR_USER
    assert json.loads((await jobs_db.jobs.get(job.id)).agent_question or "")["plan"].startswith(
        "## Plan v2"
    )

    await jobs_db.jobs.respond(job.id, response_text("approve", "", None))
    _, status = await run_once(jobs_db, runner, "w3")
    assert status is JobStatus.COMPLETED
    done = await jobs_db.jobs.get(job.id)
    assert (done.result, done.user_answer, done.agent_question) == (
        "The report is ready.",
        None,
        None,
    )
    [artifact] = await jobs_db.files.artifacts(job.id)
    assert artifact.filename == "report.md"
    assert (await jobs_db.files.artifact(job.id, artifact.id)).content == b"# Stars\n"
    # Each answer is the result of the question that asked it, exactly once, in seed 002's words.
    records = await jobs_db.jobs.records(job.id)
    assert tool_results(records, "ask_user") == [
        "[PLAN EDITED] User modified the plan:\n\n## Plan v2\n\n"
        "Additional feedback: shorter please",
        "[PLAN APPROVED] User approved the plan.",
    ]
    assert sum(1 for r in records if isinstance(r, UserMessageRecord)) == 1
    messages = [line.message for line in await jobs_db.logs.page(job.id)]
    assert messages.count("Job started") == 1 and messages[-1] == "Job completed"


async def test_a_rejected_plan_ends_as_the_model_says(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    runner = runner_for(jobs_db, PLANNING, sandbox, tmp_path)
    job = await jobs_db.jobs.create(NewJob("Write a report"))
    await run_once(jobs_db, runner)
    await jobs_db.jobs.respond(job.id, response_text("reject", "not now", None))
    _, status = await run_once(jobs_db, runner)
    assert status is JobStatus.COMPLETED
    assert (await jobs_db.jobs.get(job.id)).result == "Stopped as asked."
    assert tool_results(await jobs_db.jobs.records(job.id), "ask_user") == [
        "[PLAN REJECTED] not now"
    ]
    assert await jobs_db.files.artifacts(job.id) == []


SLOW = rules(
    ("Task:", {"text": "", "toolCalls": [call("run_python", code="import time; time.sleep(20)")]})
)


async def test_the_time_limit_is_enforced(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    runner = runner_for(jobs_db, SLOW, sandbox, tmp_path)
    job = await jobs_db.jobs.create(
        NewJob("sleep", timeout_seconds=1, hitl_mode=HitlMode.AUTO_EXECUTE)
    )
    _, status = await run_once(jobs_db, runner)
    assert status is JobStatus.FAILED
    failed = await jobs_db.jobs.get(job.id)
    assert failed.error_message == "The job timed out after 1 s."
    # The interrupted call got its result: the records stay valid for any model.
    assert tool_results(await jobs_db.jobs.records(job.id), "run_python") == [
        "Not completed: The job was timed out after 1 s."
    ]


async def test_a_running_job_is_cancelled_within_seconds(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    runner = runner_for(jobs_db, SLOW, sandbox, tmp_path)
    job = await jobs_db.jobs.create(NewJob("sleep", hitl_mode=HitlMode.AUTO_EXECUTE))
    claim = await jobs_db.jobs.claim("w1")
    assert claim is not None
    signal = StopSignal()
    run = asyncio.create_task(runner.run(claim, signal))
    await asyncio.sleep(0.5)
    await jobs_db.jobs.cancel(job.id)
    signal.stop(Stop.CANCEL)
    async with asyncio.timeout(5):
        assert await run is JobStatus.CANCELLED
    assert (await jobs_db.jobs.get(job.id)).status is JobStatus.CANCELLED


async def test_a_drained_job_goes_back_to_the_queue_and_resumes(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    runner = runner_for(jobs_db, SLOW, sandbox, tmp_path)
    job = await jobs_db.jobs.create(NewJob("sleep", hitl_mode=HitlMode.AUTO_EXECUTE))
    claim = await jobs_db.jobs.claim("w1")
    assert claim is not None
    signal = StopSignal()
    run = asyncio.create_task(runner.run(claim, signal))
    await asyncio.sleep(0.5)
    signal.stop(Stop.DRAIN)
    assert await run is JobStatus.QUEUED
    released = await jobs_db.jobs.get(job.id)
    assert (released.status, released.retry_count) == (JobStatus.QUEUED, 0)


async def test_a_job_whose_worker_died_resumes_from_its_last_step_on_another(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path, clock: Clock
) -> None:
    provider = rules(
        ("Task:", {"text": "", "toolCalls": [call("write_file", filename="a.txt", content="A")]}),
        ("restarted", {"text": "", "toolCalls": [call("final_answer", answer="done")]}),
    )
    runner = runner_for(jobs_db, provider, sandbox, tmp_path)
    job = await jobs_db.jobs.create(NewJob("write a", hitl_mode=HitlMode.AUTO_EXECUTE))
    # The first worker got as far as its first step, then died (its records stay).
    dead = await jobs_db.jobs.claim("dead")
    assert dead is not None
    from claybot.agents.history import assistant_message_record, user_message_record
    from claybot.providers.base import ToolCall

    write = ToolCall("c1", "write_file", {"filename": "a.txt", "content": "A"})
    written = [
        user_message_record(1, "Task: write a", job.id),
        assistant_message_record(2, "", job.id, tool_calls=[write], final=False),
    ]
    await jobs_db.jobs.append_records(dead, 0, written)
    clock.advance(31)
    assert (await jobs_db.jobs.sweep()).requeued == [job.id]
    _, status = await run_once(jobs_db, runner, "alive")
    assert status is JobStatus.COMPLETED
    # The call the dead worker was running is reported, not run again.
    records = await jobs_db.jobs.records(job.id)
    assert tool_results(records, "write_file")[0].startswith("The engine restarted")
    with pytest.raises(LeaseLost):
        await jobs_db.jobs.append_records(dead, len(records), [NoteRecord(at=3, text="late")])
    assert len(await jobs_db.jobs.records(job.id)) == len(records)


async def test_a_file_its_call_and_its_result_are_written_together_or_not_at_all(
    jobs_db: JobDatabase,
    sandbox: Sandbox,
    tmp_path: Path,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = rules(
        ("Task:", {"text": "", "toolCalls": [WRITE_A]}),
        ("Wrote a.txt", {"text": "", "toolCalls": [DONE]}),
    )
    job = await jobs_db.jobs.create(NewJob("write a", hitl_mode=HitlMode.AUTO_EXECUTE))
    claim = await jobs_db.jobs.claim("dying")
    assert claim is not None

    async def lost(*args: Any, **kwargs: Any) -> None:
        raise LeaseLost("the worker died")

    # The worker dies as the step with the file is written: none of it lands.
    monkeypatch.setattr(jobs_db.jobs, "append_records", lost)
    writes = jobs_db.tables.writer.writes
    assert await runner_for(jobs_db, provider, sandbox, tmp_path).run(claim, StopSignal()) is None
    assert jobs_db.tables.writer.writes == writes
    assert await jobs_db.jobs.records(job.id) == []
    assert await jobs_db.files.artifacts(job.id) == []
    monkeypatch.undo()

    # Another worker, on another machine, does the step again: the file, the call that
    # wrote it and its result in one write; its script then finds the file.
    steps: list[tuple[list[str], str | None]] = []
    append_records = jobs_db.jobs.append_records

    async def noting(*args: Any, **kwargs: Any) -> None:
        artifact = kwargs.get("artifact")
        steps.append((kinds(args[2]), artifact and artifact.filename))
        await append_records(*args, **kwargs)

    monkeypatch.setattr(jobs_db.jobs, "append_records", noting)
    clock.advance(31)
    assert (await jobs_db.jobs.sweep()).requeued == [job.id]
    read = call("run_python", code="print('read:', open('a.txt').read())")
    elsewhere = rules(
        ("Task:", {"text": "", "toolCalls": [WRITE_A]}),
        ("Wrote a.txt", {"text": "", "toolCalls": [read]}),
        ("Exit code", {"text": "", "toolCalls": [DONE]}),
    )
    runner = runner_for(jobs_db, elsewhere, sandbox, tmp_path / "elsewhere")
    _, status = await run_once(jobs_db, runner, "alive")
    assert status is JobStatus.COMPLETED
    assert steps[0] == (["user_message", "assistant_message", "tool_result"], "a.txt")
    records = await jobs_db.jobs.records(job.id)
    assert tool_results(records, "write_file") == ["Wrote a.txt (1 bytes)."]
    assert "read: A" in tool_results(records, "run_python")[0]
    assert len(await jobs_db.files.artifacts(job.id)) == 1
    lines = [line.message for line in await jobs_db.logs.page(job.id)]
    assert lines.count("Artifact written: a.txt (1 bytes)") == 1


async def test_a_job_of_one_file_costs_two_writes_after_its_claim(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    provider = rules(
        ("Task:", {"text": "", "toolCalls": [WRITE_A]}),
        ("Wrote a.txt", {"text": "", "toolCalls": [DONE]}),
    )
    job = await jobs_db.jobs.create(NewJob("write a", hitl_mode=HitlMode.AUTO_EXECUTE))
    claim = await jobs_db.jobs.claim("w1")
    assert claim is not None
    writes = jobs_db.tables.writer.writes
    assert await runner_for(jobs_db, provider, sandbox, tmp_path).run(claim, StopSignal()) is (
        JobStatus.COMPLETED
    )
    # The file with the call that wrote it and its result; the ending with the final
    # call and its result.
    assert jobs_db.tables.writer.writes - writes == 2
    records = await jobs_db.jobs.records(job.id)
    assert kinds(records) == [
        "user_message",
        "assistant_message",
        "tool_result",
        "assistant_message",
        "tool_result",
    ]
    assert (await jobs_db.jobs.get(job.id)).result == "done"


PROBE = """
import socket
from pathlib import Path
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("network: reached")
except OSError as exc:
    print("network: unreachable", type(exc).__name__)
try:
    socket.socket(socket.AF_UNIX).connect({database!r})
    print("database: reached")
except OSError as exc:
    print("database: unreachable", type(exc).__name__)
for name, path in (("host", {host!r}), ("tmp", {beside!r})):
    try:
        Path(path).write_text("escaped")
        print(name, "written")
    except OSError as exc:
        print(name, "refused", type(exc).__name__)
Path("table.csv").write_text("a,b\\n1,2\\n")
"""


@pytest.mark.parametrize("allow_network", [False, True])
async def test_run_python_stays_in_its_directory_and_off_the_hosts_network(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path, allow_network: bool
) -> None:
    # With the network allowed too: a job's network is the egress proxy, never the host's.
    listener = socket.create_server(("127.0.0.1", 0))  # on the host's own loopback
    host = Path(f"/var/tmp/claybot-escape-{uuid.uuid4().hex}.txt")  # a real, writable folder
    beside = tmp_path / "beside.txt"  # next to the job's folder, in the host's /tmp
    # The PostgreSQL the suite runs on, through its Unix socket (past any namespace).
    [database, *_] = glob.glob("/run/postgresql/.s.PGSQL.*")
    probe = PROBE.format(
        port=listener.getsockname()[1], database=database, host=str(host), beside=str(beside)
    )
    provider = rules(
        ("Task:", {"text": "", "toolCalls": [call("run_python", code=probe)]}),
        ("Exit code", {"text": "", "toolCalls": [call("final_answer", answer="Probed.")]}),
    )
    runner = runner_for(jobs_db, provider, sandbox, tmp_path)
    try:
        job = await jobs_db.jobs.create(
            NewJob("probe", hitl_mode=HitlMode.AUTO_EXECUTE, allow_network=allow_network)
        )
        _, status = await run_once(jobs_db, runner)
    finally:
        listener.close()
        await runner.close()
    assert status is JobStatus.COMPLETED
    [output] = tool_results(await jobs_db.jobs.records(job.id), "run_python")
    assert "network: unreachable ConnectionRefusedError" in output, output
    assert "database: unreachable FileNotFoundError" in output, output
    assert "host refused OSError" in output, output
    # /tmp is the sandbox's own: a write there succeeds and is gone with the sandbox.
    assert not await asyncio.to_thread(host.exists)
    assert not await asyncio.to_thread(beside.exists)
    assert "Files saved as artifacts: table.csv" in output
    [artifact] = await jobs_db.files.artifacts(job.id)
    assert artifact.filename == "table.csv"


@pytest.mark.parametrize("mode", ["auto", "unconfined"])  # bubblewrap, and unshare alone
async def test_run_python_with_the_network_reaches_public_addresses_through_the_proxy_only(
    jobs_db: JobDatabase, tmp_path: Path, mode: SandboxMode
) -> None:
    ours, other = silent_listener("127.0.0.1"), silent_listener("127.0.0.2")
    first, second = ours.getsockname()[1], other.getsockname()[1]
    sandbox = Sandbox(tmp_path / "home", environ={"PATH": "/usr/bin:/bin"})
    async with public_server() as (port, seen):
        plan = Plan(
            direct=[("127.0.0.1", first), ("127.0.0.2", second), ("127.0.0.1", 5432)],
            proxied=[
                f"http://127.0.0.1:{first}/",
                f"https://127.0.0.2:{second}/",
                "https://127.0.0.1:5432/",
                f"http://[::1]:{first}/",
                "http://10.0.0.1/",
                "https://169.254.169.254/",
            ],
            public=(PUBLIC_HOST, port),
        )
        provider = rules(
            ("Task:", {"text": "", "toolCalls": [call("run_python", code=plan.script())]}),
            ("Exit code", {"text": "", "toolCalls": [call("final_answer", answer="Probed.")]}),
        )
        runner = JobRunner(
            jobs_db,
            lambda _model: provider,
            sandbox.runner("jobs", SandboxConfig(mode, DEFAULT_LIMITS)),
            tmp_path / "work",
            RunLimits(max_iterations=10, python_timeout_s=30),
            egress=public_proxy(),
        )
        try:
            job = await jobs_db.jobs.create(
                NewJob("probe", hitl_mode=HitlMode.AUTO_EXECUTE, allow_network=True)
            )
            _, status = await run_once(jobs_db, runner)
            [output] = tool_results(await jobs_db.jobs.records(job.id), "run_python")
        finally:
            await runner.close()
            await sandbox.close()
            leaked = connections_seen(ours), connections_seen(other)
            ours.close()
            other.close()

    assert status is JobStatus.COMPLETED, output
    report = report_of(output.split("\n\nExit code")[0])
    assert all(
        outcome.startswith("ConnectionRefusedError") for outcome in report["direct"].values()
    ), output
    rule = {"10.0.0.1": "private", "169.254.169.254": "link-local"}
    assert [
        refused_by_the_proxy(outcome, rule.get(url.split("/")[2], "loopback"))
        for url, outcome in report["proxied"].items()
    ] == [True] * len(plan.proxied), output
    assert leaked == (0, 0)
    assert_public_reached(report, port, seen)


ECHO_SERVER = str(Path(__file__).parent.parent / "plugins" / "mcp_echo_server.py")


async def test_a_resumed_job_can_call_the_mcp_tools_it_discovered_before(
    jobs_db: JobDatabase, sandbox: Sandbox, tmp_path: Path
) -> None:
    server = await jobs_db.registry.register(
        NewServer("echo", "Shouts text in capitals", "echo-pkg", command=sys.executable,
                  args=(ECHO_SERVER,))
    )  # fmt: skip
    await jobs_db.registry.mark_verified(
        server.id, await list_tools(server, tmp_path / "mcp-logs"), "test"
    )
    provider = rules(
        ("Task:", {"text": "", "toolCalls": [call("mcp__echo__shout", text="again")]}),
        ("AGAIN!", {"text": "", "toolCalls": [call("final_answer", answer="It said AGAIN!")]}),
    )
    runner = runner_for(jobs_db, provider, sandbox, tmp_path)
    job = await jobs_db.jobs.create(NewJob("resume", hitl_mode=HitlMode.AUTO_EXECUTE))
    first = await jobs_db.jobs.claim("w1")
    assert first is not None
    await jobs_db.jobs.record_discovered(first, ["echo-pkg"])  # found in an earlier run
    await jobs_db.jobs.release(first)
    try:
        _, status = await run_once(jobs_db, runner, "w2")
    finally:
        await runner.close()
    assert status is JobStatus.COMPLETED
    assert (await jobs_db.jobs.get(job.id)).result == "It said AGAIN!"
    assert tool_results(await jobs_db.jobs.records(job.id), "mcp__echo__shout") == ["AGAIN!"]
