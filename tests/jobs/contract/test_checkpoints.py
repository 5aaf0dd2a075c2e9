"""The job store's contract for a claimed job's writes: records appended at each
checkpoint, all or nothing; its end, its pause, the tools it found; its log lines,
each step's once; and the events heard once each change is made."""

from __future__ import annotations

from typing import Any

import pytest

from claybot.agents.records import AssistantMessageRecord
from claybot.jobs.model import InvalidJobState, JobStatus, LeaseLost, NewJob
from claybot.jobs.port import Checkpoint, NewArtifact
from claybot.providers.base import ToolCall
from tests.jobs.conftest import Clock
from tests.jobs.contract.conftest import Store, note


async def test_two_records_under_one_number_are_refused(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    first = note("a")
    await store.jobs.append_records(claim, 0, [first])
    with pytest.raises(LeaseLost):
        await store.jobs.append_records(claim, 0, [note("b")])
    # The same checkpoint sent again (its sender was cancelled as it committed) is no error.
    second = note("c")
    await store.jobs.append_records(claim, 0, [first, second])
    await store.jobs.append_records(claim, 0, [first, second])
    assert await store.jobs.records(job.id) == [first, second]


async def test_a_refused_checkpoint_writes_none_of_itself(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    first = note("a")
    await store.jobs.append_records(claim, 0, [first], state={"step": 1})
    artifact = NewArtifact("out.txt", "text/plain", b"x", claim.job.created_at)
    with pytest.raises(LeaseLost):
        await store.jobs.append_records(
            claim,
            0,
            [note("b"), note("c")],
            state={"step": 2},
            logs=[("s1", "a line")],
            artifact=artifact,
        )
    assert await store.jobs.records(job.id) == [first]
    assert (await store.jobs.get(job.id)).execution_state == {"step": 1}
    assert [line.message for line in await store.logs.page(job.id)] == ["Job created"]
    assert await store.logs.step_keys(job.id) == set()
    assert await store.artifacts(job.id) == []


async def test_records_keep_what_only_json_can_write(store: Store) -> None:
    # orjson writes the records, json what orjson refuses: a model may well send an
    # integer past 64 bits in a tool call's arguments.
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    records = [
        _calling({"n": 2**70, "text": "é ✓"}),
        _calling({"n": -(2**63)}),
    ]
    await store.jobs.append_records(claim, 0, records)
    assert await store.jobs.records(job.id) == records


async def test_records_and_state_are_stored_as_they_were_when_written(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    record = _calling({"parts": [1, 2]})
    state: dict[str, Any] = {"nested": {"n": 1}}
    await store.jobs.append_records(claim, 0, [record], state=state)
    # The caller's objects change afterwards: the stored do not.
    record.toolCalls[0].arguments["parts"].append(3)
    state["nested"]["n"] = 2
    read = await store.jobs.records(job.id)
    assert read == [_calling({"parts": [1, 2]})]
    assert isinstance(read[0], AssistantMessageRecord)
    read[0].toolCalls[0].arguments["parts"].append(4)  # nor do they through what was read
    assert await store.jobs.records(job.id) == [_calling({"parts": [1, 2]})]
    assert (await store.jobs.get(job.id)).execution_state == {"nested": {"n": 1}}


def _calling(arguments: dict[str, Any]) -> AssistantMessageRecord:
    """A record whose tool call carries ``arguments``: free-form JSON, as the model sent it."""
    return AssistantMessageRecord(
        at=0, messageId="m1", text="", toolCalls=[ToolCall("c1", "tool", arguments)], final=False
    )


async def test_the_end_is_written_with_its_last_checkpoint(store: Store, clock: Clock) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    await store.jobs.append_records(claim, 0, [note("a")])
    clock.advance(3)
    last = Checkpoint(1, [note("b")], [("s9", "last step")])
    await store.jobs.finish(
        claim, JobStatus.COMPLETED, result="done", log="Job completed", checkpoint=last
    )
    ended = await store.jobs.get(job.id)
    assert (ended.status, ended.result, ended.error_message) == (JobStatus.COMPLETED, "done", None)
    assert ended.completed_at == ended.updated_at == clock.now
    assert ended.worker_id == "w1"  # who ran it
    assert await store.jobs.records(job.id) == [
        note("a"),
        note("b"),
    ]
    assert [(line.message, line.level) for line in await store.logs.page(job.id)] == [
        ("Job created", "info"),
        ("last step", "info"),
        ("Job completed", "info"),
    ]
    with pytest.raises(LeaseLost):  # it ended: the claim holds no more
        await store.jobs.append_records(claim, 2, [note("c")])


async def test_an_end_the_status_does_not_allow_is_refused_and_not_written(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    with pytest.raises(InvalidJobState):
        await store.jobs.finish(claim, JobStatus.RUNNING, log="never")
    assert (await store.jobs.get(job.id)).status is JobStatus.RUNNING
    await store.jobs.finish(claim, JobStatus.FAILED, error="it broke")
    failed = await store.jobs.get(job.id)
    assert (failed.status, failed.error_message) == (JobStatus.FAILED, "it broke")
    assert [line.message for line in await store.logs.page(job.id)] == ["Job created"]


async def test_a_pause_writes_its_question_state_and_line(store: Store, clock: Clock) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    clock.advance(2)
    await store.jobs.pause(claim, "Proceed?", {"n": 1}, log="Waiting for the user")
    waiting = await store.jobs.get(job.id)
    assert (waiting.status, waiting.paused_at, waiting.updated_at) == (
        JobStatus.WAITING_FOR_USER,
        clock.now,
        clock.now,
    )
    assert [line.message for line in await store.logs.page(job.id)] == [
        "Job created",
        "Waiting for the user",
    ]
    clock.advance(31)  # a waiting job holds no lease: nothing to sweep
    assert (await store.jobs.sweep()).requeued == []


async def test_discovered_tools_accumulate_once_each(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    assert await store.jobs.record_discovered(claim, ["a", "b"]) == ["a", "b"]
    assert await store.jobs.record_discovered(claim, ["b", "c"]) == ["a", "b", "c"]
    assert (await store.jobs.get(job.id)).tools_discovered == ["a", "b", "c"]
    await store.jobs.release(claim)
    again = await store.claimed()
    assert again.job.tools_discovered == ["a", "b", "c"]  # a resumed run has them


async def test_an_artifact_written_again_with_a_checkpoint_is_replaced(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    at = claim.job.created_at
    await store.jobs.append_records(
        claim, 0, [], artifact=NewArtifact("out.txt", "text/plain", b"one", at)
    )
    [first] = await store.artifacts(job.id)
    await store.jobs.append_records(
        claim, 0, [], artifact=NewArtifact("out.txt", "text/markdown", b"two!", at)
    )
    [second] = await store.artifacts(job.id)
    assert second.id == first.id
    assert (second.filename, second.mime_type, second.size_bytes) == (
        "out.txt",
        "text/markdown",
        4,
    )


async def test_a_step_writes_its_log_line_once(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    assert await store.logs.add(job.id, "Tool call: x", claim=claim, step_key="c1")
    assert not await store.logs.add(job.id, "Tool call: x", claim=claim, step_key="c1")
    await store.logs.add(job.id, "free line", level="warn", metadata={"n": 1})
    lines = await store.logs.page(job.id)
    assert [line.message for line in lines] == ["Job created", "Tool call: x", "free line"]
    assert (lines[2].level, lines[2].metadata, lines[2].job_id) == ("warn", {"n": 1}, job.id)
    assert [line.message for line in await store.logs.page(job.id, after_id=lines[1].id)] == [
        "free line"
    ]
    assert await store.logs.page(job.id, limit=1, offset=1) == [lines[1]]
    assert await store.logs.step_keys(job.id) == {"c1"}


async def test_log_lines_of_two_jobs_keep_one_order(store: Store, clock: Clock) -> None:
    first = await store.jobs.create(NewJob("a"))
    second = await store.jobs.create(NewJob("b"))
    await store.logs.add(first.id, "a1")
    clock.advance(1)
    await store.logs.add(second.id, "b1")
    await store.logs.add(first.id, "a2")
    a_lines, b_lines = await store.logs.page(first.id), await store.logs.page(second.id)
    assert [line.message for line in a_lines] == ["Job created", "a1", "a2"]
    assert [line.message for line in b_lines] == ["Job created", "b1"]
    assert a_lines[1].id < b_lines[1].id < a_lines[2].id
    assert b_lines[1].timestamp == clock.now


async def test_a_checkpoints_lines_are_written_once_in_order_and_heard_with_their_ids(
    store: Store,
) -> None:
    heard: list[dict[str, Any]] = []
    store.events.subscribe(
        lambda kind, payload: heard.append(payload) if kind == "job.log" else None
    )
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    lines = [("s1", "first"), ("s2", "second")]
    record = note("a")
    await store.jobs.append_records(claim, 0, [record], logs=lines)
    # Sent again (cancelled as it committed), with one line more: only that one is new.
    await store.jobs.append_records(claim, 0, [record], logs=[*lines, ("s3", "third")])
    await store.jobs.finish(claim, JobStatus.FAILED, error="e", log="Job failed: e")
    written = await store.logs.page(job.id)
    assert [(line.message, line.level) for line in written] == [
        ("Job created", "info"),
        ("first", "info"),
        ("second", "info"),
        ("third", "info"),
        ("Job failed: e", "error"),
    ]
    assert [(p["jobId"], p["id"], p["message"], p["level"]) for p in heard] == [
        (job.id, line.id, line.message, line.level) for line in written[1:]
    ]
    assert await store.jobs.records(job.id) == [record]
    assert await store.logs.step_keys(job.id) == {"s1", "s2", "s3"}


async def test_changes_are_published_once_made_and_refusals_publish_nothing(
    store: Store, clock: Clock
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    unsubscribe = store.events.subscribe(lambda kind, payload: seen.append((kind, payload)))
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    await store.logs.add(job.id, "hello", claim=claim)
    with pytest.raises(InvalidJobState):
        await store.jobs.respond(job.id, "x")  # refused: publishes nothing
    await store.jobs.cancel(job.id)
    await store.jobs.finish(claim, JobStatus.COMPLETED, result="r")
    other = await store.jobs.create(NewJob("u"))
    await store.jobs.pause(await store.claimed(), "?", {})
    await store.jobs.respond(other.id, "yes")
    await store.jobs.release(await store.claimed())
    await store.claimed()
    clock.advance(31)
    await store.jobs.sweep()
    await store.jobs.cancel((await store.jobs.create(NewJob("v"))).id)
    assert [(kind, payload.get("status")) for kind, payload in seen] == [
        ("job.created", "queued"),
        ("job.status", "running"),
        ("job.log", None),
        ("job.cancel_requested", None),
        ("job.status", "completed"),
        ("job.created", "queued"),
        ("job.status", "running"),
        ("job.status", "waiting_for_user"),
        ("job.status", "queued"),
        ("job.status", "running"),
        ("job.status", "queued"),
        ("job.status", "running"),
        ("job.status", "queued"),  # swept
        ("job.created", "queued"),
        ("job.status", "cancelled"),
    ]
    assert {payload["jobId"] for _, payload in seen[:5]} == {job.id}
    unsubscribe()
    await store.jobs.create(NewJob("unheard"))
    assert len(seen) == 15
