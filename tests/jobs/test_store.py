"""The job store on SQLite and PostgreSQL: statuses, claims, leases, fences, files and logs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from claybot.db.sql_keys import SqlApiKeyStore
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import (
    Claim,
    HitlMode,
    InvalidJobState,
    JobNotFound,
    JobStatus,
    LeaseLost,
    NewJob,
)
from claybot.kernel.errors import InvalidInput, NotFound
from tests.jobs.conftest import Clock


async def key_id(db: JobDatabase, name: str = "k") -> str:
    record, _ = await SqlApiKeyStore(db.tables.engine).create(name, ["jobs:read", "jobs:write"])
    return record.id


async def claimed(db: JobDatabase, worker: str = "w1") -> Claim:
    claim = await db.jobs.claim(worker)
    assert claim is not None
    return claim


async def test_a_job_is_seen_by_its_key_and_by_everyone_but_not_by_another_key(
    jobs_db: JobDatabase,
) -> None:
    mine, theirs = await key_id(jobs_db, "mine"), await key_id(jobs_db, "theirs")
    job = await jobs_db.jobs.create(NewJob("count the stars", api_key_id=mine))
    assert (job.status, job.hitl_mode.value, job.attempt) == (JobStatus.QUEUED, "plan_approval", 0)
    assert (await jobs_db.jobs.get(job.id, mine)).task == "count the stars"
    assert (await jobs_db.jobs.get(job.id)).id == job.id
    with pytest.raises(JobNotFound):
        await jobs_db.jobs.get(job.id, theirs)
    with pytest.raises(JobNotFound):
        await jobs_db.jobs.cancel(job.id, theirs)
    assert await jobs_db.jobs.page(theirs) == ([], 0)


async def test_a_created_job_is_the_job_as_stored(jobs_db: JobDatabase) -> None:
    # On SQLite creating reads nothing back: the job is built from what was inserted.
    key = await key_id(jobs_db)
    for new in (
        NewJob("t"),
        NewJob(
            "u",
            priority=7,
            timeout_seconds=30,
            model="scripted",
            hitl_mode=HitlMode.ALWAYS_ASK,
            allow_network=True,
            max_retries=1,
            api_key_id=key,
        ),
    ):
        created = await jobs_db.jobs.create(new)
        assert created == await jobs_db.jobs.get(created.id)


async def test_pages_filter_by_status_and_count_them(jobs_db: JobDatabase, clock: Clock) -> None:
    for n in range(5):
        await jobs_db.jobs.create(NewJob(f"job {n}"))
        clock.advance(1)
    await jobs_db.jobs.claim("w1")
    page, total = await jobs_db.jobs.page(status=JobStatus.QUEUED, limit=2, offset=1)
    assert total == 4
    assert [job.task for job in page] == ["job 3", "job 2"]  # newest first


async def test_claims_take_priority_then_age_and_none_when_empty(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    for task, priority in [("old", 0), ("urgent", 5), ("new", 0)]:
        await jobs_db.jobs.create(NewJob(task, priority=priority))
        clock.advance(1)
    order = [(await claimed(jobs_db)).job.task for _ in range(3)]
    assert order == ["urgent", "old", "new"]
    assert await jobs_db.jobs.claim("w1") is None


async def test_concurrent_claimers_take_each_job_once(jobs_db: JobDatabase) -> None:
    for n in range(30):
        await jobs_db.jobs.create(NewJob(f"job {n}"))

    async def claimer(worker: str) -> list[str]:
        taken = []
        while (claim := await jobs_db.jobs.claim(worker)) is not None:
            taken.append(claim.job.id)
        return taken

    results = await asyncio.gather(*(claimer(f"w{n}") for n in range(6)))
    everything = [job_id for taken in results for job_id in taken]
    assert len(everything) == 30 == len(set(everything))


async def test_a_lost_lease_is_requeued_and_the_old_workers_writes_are_refused(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    first = await claimed(jobs_db, "dead")
    await jobs_db.jobs.append_records(first, 0, [{"type": "user_message", "text": "t"}])
    clock.advance(31)  # its heartbeat stopped: the lease ran out
    swept = await jobs_db.jobs.sweep()
    assert swept.requeued == [job.id]
    again = await jobs_db.jobs.get(job.id)
    assert (again.status, again.retry_count, again.worker_id) == (JobStatus.QUEUED, 1, None)
    second = await claimed(jobs_db, "alive")
    assert second.attempt == 2
    # The dead worker wakes up and writes: nothing of it lands.
    with pytest.raises(LeaseLost):
        await jobs_db.jobs.append_records(first, 1, [{"type": "note", "text": "late"}])
    with pytest.raises(LeaseLost):
        await jobs_db.jobs.finish(first, JobStatus.COMPLETED, result="late")
    with pytest.raises(LeaseLost):
        await jobs_db.logs.add(job.id, "late", claim=first)
    with pytest.raises(LeaseLost):
        await jobs_db.files.put_artifact(first, "late.txt", b"x", "text/plain")
    await jobs_db.jobs.finish(second, JobStatus.COMPLETED, result="done")
    final = await jobs_db.jobs.get(job.id)
    assert (final.status, final.result) == (JobStatus.COMPLETED, "done")
    assert await jobs_db.jobs.records(job.id) == [{"type": "user_message", "text": "t"}]
    assert [line.message for line in await jobs_db.logs.page(job.id)] == ["Job created"]
    assert await jobs_db.files.artifacts(job.id) == []


async def test_a_renewed_lease_is_not_swept(jobs_db: JobDatabase, clock: Clock) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    await claimed(jobs_db)
    clock.advance(20)
    renewal = await jobs_db.jobs.renew("w1", [job.id])
    assert renewal.cancelled == renewal.lost == set()
    clock.advance(20)
    assert (await jobs_db.jobs.sweep()).requeued == []


async def test_retries_spent_fail_the_job(jobs_db: JobDatabase, clock: Clock) -> None:
    job = await jobs_db.jobs.create(NewJob("t", max_retries=1))
    for _ in range(2):
        await claimed(jobs_db)
        clock.advance(31)
        await jobs_db.jobs.sweep()
    final = await jobs_db.jobs.get(job.id)
    assert final.status is JobStatus.FAILED and final.retry_count == 1
    assert "retries" in (final.error_message or "")


async def test_two_records_under_one_number_are_refused(jobs_db: JobDatabase) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    first = {"type": "note", "text": "a"}
    await jobs_db.jobs.append_records(claim, 0, [first])
    with pytest.raises(LeaseLost):
        await jobs_db.jobs.append_records(claim, 0, [{"type": "note", "text": "b"}])
    # The same checkpoint sent again (its sender was cancelled as it committed) is no error.
    second = {"type": "note", "text": "c"}
    await jobs_db.jobs.append_records(claim, 0, [first, second])
    await jobs_db.jobs.append_records(claim, 0, [first, second])
    assert await jobs_db.jobs.records(job.id) == [first, second]


async def test_records_keep_what_only_json_can_write(jobs_db: JobDatabase) -> None:
    # orjson writes the records, json what orjson refuses: a model may well send an
    # integer past 64 bits in a tool call's arguments.
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    records = [{"type": "note", "n": 2**70, "text": "é ✓"}, {"type": "note", "n": -(2**63)}]
    await jobs_db.jobs.append_records(claim, 0, records)
    assert await jobs_db.jobs.records(job.id) == records


async def test_waiting_respond_and_the_moves_refused(jobs_db: JobDatabase) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    with pytest.raises(InvalidJobState):
        await jobs_db.jobs.respond(job.id, "yes")  # it asked nothing
    claim = await claimed(jobs_db)
    await jobs_db.jobs.pause(claim, "Proceed?", {"checkpoint": "waiting_for_input"})
    waiting = await jobs_db.jobs.get(job.id)
    assert (waiting.status, waiting.agent_question, waiting.worker_id) == (
        JobStatus.WAITING_FOR_USER,
        "Proceed?",
        None,
    )
    assert waiting.paused_at is not None
    with pytest.raises(LeaseLost):  # the pause ended the claim
        await jobs_db.jobs.finish(claim, JobStatus.COMPLETED)
    answered = await jobs_db.jobs.respond(job.id, "[PLAN APPROVED] go")
    assert (answered.status, answered.user_answer, answered.agent_question) == (
        JobStatus.QUEUED,
        "[PLAN APPROVED] go",
        None,
    )
    second = await claimed(jobs_db)
    await jobs_db.jobs.append_records(second, 0, [], clear_answer=True)
    assert (await jobs_db.jobs.get(job.id)).user_answer is None
    await jobs_db.jobs.finish(second, JobStatus.COMPLETED, result="ok")
    for attempt in (
        jobs_db.jobs.respond(job.id, "again"),
        jobs_db.jobs.cancel(job.id),
    ):
        with pytest.raises(InvalidJobState):
            await attempt


async def test_cancel_ends_a_queued_job_and_asks_a_running_one(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    queued = await jobs_db.jobs.create(NewJob("a"))
    clock.advance(1)
    running = await jobs_db.jobs.create(NewJob("b", priority=1))
    claim = await claimed(jobs_db)
    assert claim.job.id == running.id
    assert (await jobs_db.jobs.cancel(queued.id)).status is JobStatus.CANCELLED
    asked = await jobs_db.jobs.cancel(running.id)
    assert asked.status is JobStatus.RUNNING and asked.cancel_requested
    assert (await jobs_db.jobs.renew("w1", [running.id])).cancelled == {running.id}
    assert (await jobs_db.jobs.renew("w2", [running.id])).lost == {running.id}
    await jobs_db.jobs.finish(claim, JobStatus.CANCELLED)
    assert (await jobs_db.jobs.get(running.id)).status is JobStatus.CANCELLED


async def test_a_cancelled_job_whose_worker_died_is_swept_to_cancelled(
    jobs_db: JobDatabase, clock: Clock
) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    await claimed(jobs_db)
    await jobs_db.jobs.cancel(job.id)
    clock.advance(31)
    assert (await jobs_db.jobs.sweep()).cancelled == [job.id]


async def test_a_step_writes_its_log_line_once(jobs_db: JobDatabase) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    assert await jobs_db.logs.add(job.id, "Tool call: x", claim=claim, step_key="c1")
    assert not await jobs_db.logs.add(job.id, "Tool call: x", claim=claim, step_key="c1")
    await jobs_db.logs.add(job.id, "free line")
    lines = await jobs_db.logs.page(job.id)
    assert [line.message for line in lines] == ["Job created", "Tool call: x", "free line"]
    assert [line.message for line in await jobs_db.logs.page(job.id, after_id=lines[1].id)] == [
        "free line"
    ]
    assert await jobs_db.logs.step_keys(job.id) == {"c1"}


async def test_a_checkpoints_lines_are_written_once_in_order_and_heard_with_their_ids(
    jobs_db: JobDatabase,
) -> None:
    heard: list[dict[str, Any]] = []
    jobs_db.tables.subscribe(
        lambda kind, payload: heard.append(payload) if kind == "job.log" else None
    )
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    lines = [("s1", "first"), ("s2", "second")]
    record = {"type": "note", "text": "a"}
    await jobs_db.jobs.append_records(claim, 0, [record], logs=lines)
    # Sent again (cancelled as it committed), with one line more: only that one is new.
    await jobs_db.jobs.append_records(claim, 0, [record], logs=[*lines, ("s3", "third")])
    await jobs_db.jobs.finish(claim, JobStatus.FAILED, error="e", log="Job failed: e")
    written = await jobs_db.logs.page(job.id)
    assert [(line.message, line.level) for line in written] == [
        ("Job created", "info"),
        ("first", "info"),
        ("second", "info"),
        ("third", "info"),
        ("Job failed: e", "error"),
    ]
    assert [(p["id"], p["message"], p["level"]) for p in heard] == [
        (line.id, line.message, line.level) for line in written[1:]
    ]
    assert await jobs_db.jobs.records(job.id) == [record]


async def test_an_artifact_written_again_is_replaced(jobs_db: JobDatabase) -> None:
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    first = await jobs_db.files.put_artifact(claim, "out.txt", b"one", "text/plain")
    second = await jobs_db.files.put_artifact(claim, "out.txt", b"two!", "text/plain")
    assert first.id == second.id
    listed = await jobs_db.files.artifacts(job.id)
    assert [(a.filename, a.size_bytes) for a in listed] == [("out.txt", 4)]
    assert (await jobs_db.files.artifact(job.id, first.id)).content == b"two!"
    with pytest.raises(NotFound):
        await jobs_db.files.artifact(job.id, "nope")
    with pytest.raises(InvalidInput) as too_big:
        await jobs_db.files.put_artifact(claim, "big.bin", b"x" * 1001, None)
    assert too_big.value.code == "FILE_TOO_LARGE"


async def test_uploads_attach_only_to_the_uploaders_own_jobs(jobs_db: JobDatabase) -> None:
    mine, theirs = await key_id(jobs_db, "mine"), await key_id(jobs_db, "theirs")
    their_job = await jobs_db.jobs.create(NewJob("theirs", api_key_id=theirs))
    with pytest.raises(JobNotFound):
        await jobs_db.files.add_attachment(
            "x.txt", b"x", "text/plain", owner=mine, viewer=mine, job_id=their_job.id
        )
    assert await jobs_db.files.attachments(their_job.id) == []
    loose = await jobs_db.files.add_attachment(
        "data.csv", b"a,b", "text/csv", owner=mine, viewer=mine
    )
    # Someone else's job cannot take my upload either.
    with pytest.raises(NotFound):
        await jobs_db.jobs.create(NewJob("steal", api_key_id=theirs, attachment_ids=(loose.id,)))
    job = await jobs_db.jobs.create(NewJob("use it", api_key_id=mine, attachment_ids=(loose.id,)))
    files = await jobs_db.files.attachments(job.id, content=True)
    assert [(f.filename, f.content) for f in files] == [("data.csv", b"a,b")]


async def test_changes_are_published_once_committed(jobs_db: JobDatabase) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    jobs_db.tables.subscribe(lambda kind, payload: seen.append((kind, payload)))
    job = await jobs_db.jobs.create(NewJob("t"))
    claim = await claimed(jobs_db)
    await jobs_db.logs.add(job.id, "hello", claim=claim)
    with pytest.raises(InvalidJobState):
        await jobs_db.jobs.respond(job.id, "x")  # refused: publishes nothing
    await jobs_db.jobs.finish(claim, JobStatus.COMPLETED, result="r")
    assert [(kind, payload.get("status")) for kind, payload in seen] == [
        ("job.created", "queued"),
        ("job.status", "running"),
        ("job.log", None),
        ("job.status", "completed"),
    ]
