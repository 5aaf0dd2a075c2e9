"""The job store's contract for jobs themselves: creating, reading, listing, who sees
what, a person's answer, cancelling, counting and deleting."""

from __future__ import annotations

from datetime import timedelta

import pytest

from claybot.jobs.model import HitlMode, InvalidJobState, JobNotFound, JobStatus, NewJob
from claybot.kernel.errors import NotFound
from tests.jobs.conftest import Clock
from tests.jobs.contract.conftest import Store, note


async def test_a_job_is_seen_by_its_key_and_by_everyone_but_not_by_another_key(
    store: Store,
) -> None:
    mine, theirs = await store.new_owner("mine"), await store.new_owner("theirs")
    job = await store.jobs.create(NewJob("count the stars", api_key_id=mine))
    assert (job.status, job.hitl_mode.value, job.attempt) == (JobStatus.QUEUED, "plan_approval", 0)
    assert (await store.jobs.get(job.id, mine)).task == "count the stars"
    assert (await store.jobs.get(job.id)).id == job.id
    with pytest.raises(JobNotFound):
        await store.jobs.get(job.id, theirs)
    with pytest.raises(JobNotFound):
        await store.jobs.cancel(job.id, theirs)
    with pytest.raises(JobNotFound):
        await store.jobs.respond(job.id, "yes", theirs)
    assert await store.jobs.page(theirs) == ([], 0)
    assert await store.jobs.counts(theirs) == {}
    assert await store.jobs.counts(mine) == {"queued": 1}


async def test_an_unknown_job_is_not_found(store: Store) -> None:
    with pytest.raises(JobNotFound):
        await store.jobs.get("no-such-job")
    with pytest.raises(JobNotFound):
        await store.jobs.cancel("no-such-job")
    with pytest.raises(JobNotFound):
        await store.jobs.respond("no-such-job", "yes")


async def test_a_created_job_is_the_job_as_stored(store: Store, clock: Clock) -> None:
    # On SQLite creating reads nothing back: the job is built from what was inserted.
    key = await store.new_owner("k")
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
        created = await store.jobs.create(new)
        assert created == await store.jobs.get(created.id)
        assert created.created_at == created.updated_at == clock.now
        assert (created.worker_id, created.retry_count, created.started_at) == (None, 0, None)


async def test_a_job_with_an_unknown_attachment_is_refused_and_not_written(store: Store) -> None:
    with pytest.raises(NotFound) as refused:
        await store.jobs.create(NewJob("t", attachment_ids=("no-such-upload",)))
    assert refused.value.field == "attachments"
    assert await store.jobs.page() == ([], 0)


async def test_pages_filter_by_status_and_count_them(store: Store, clock: Clock) -> None:
    for n in range(5):
        await store.jobs.create(NewJob(f"job {n}"))
        clock.advance(1)
    await store.jobs.claim("w1")
    page, total = await store.jobs.page(status=JobStatus.QUEUED, limit=2, offset=1)
    assert total == 4
    assert [job.task for job in page] == ["job 3", "job 2"]  # newest first
    everything, total = await store.jobs.page()
    assert total == 5
    assert [job.task for job in everything] == [f"job {n}" for n in range(4, -1, -1)]
    assert await store.jobs.page(limit=2, offset=4) == ([everything[4]], 5)
    assert await store.jobs.counts() == {"queued": 4, "running": 1}


async def test_jobs_created_at_once_are_listed_in_one_order(store: Store) -> None:
    for n in range(4):
        await store.jobs.create(NewJob(f"job {n}"))  # the clock stands still
    first, _ = await store.jobs.page(limit=2)
    rest, _ = await store.jobs.page(limit=2, offset=2)
    listed = [job.id for job in first + rest]
    assert len(set(listed)) == 4  # no job on both pages, none on neither
    again, _ = await store.jobs.page()
    assert [job.id for job in again] == listed


async def test_waiting_respond_and_the_moves_refused(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    with pytest.raises(InvalidJobState):
        await store.jobs.respond(job.id, "yes")  # it asked nothing
    claim = await store.claimed()
    with pytest.raises(InvalidJobState):
        await store.jobs.respond(job.id, "yes")  # it runs, and asked nothing
    await store.jobs.pause(claim, "Proceed?", {"checkpoint": "waiting_for_input"})
    waiting = await store.jobs.get(job.id)
    assert (waiting.status, waiting.agent_question, waiting.worker_id) == (
        JobStatus.WAITING_FOR_USER,
        "Proceed?",
        None,
    )
    assert waiting.paused_at is not None
    assert waiting.execution_state == {"checkpoint": "waiting_for_input"}
    answered = await store.jobs.respond(job.id, "[PLAN APPROVED] go")
    assert (answered.status, answered.user_answer, answered.agent_question) == (
        JobStatus.QUEUED,
        "[PLAN APPROVED] go",
        None,
    )
    assert answered.paused_at is None
    assert answered == await store.jobs.get(job.id)
    second = await store.claimed()
    assert (second.job.id, second.attempt, second.job.user_answer) == (
        job.id,
        2,
        "[PLAN APPROVED] go",
    )
    await store.jobs.append_records(second, 0, [], clear_answer=True)
    assert (await store.jobs.get(job.id)).user_answer is None
    await store.jobs.finish(second, JobStatus.COMPLETED, result="ok")
    for attempt in (store.jobs.respond(job.id, "again"), store.jobs.cancel(job.id)):
        with pytest.raises(InvalidJobState):
            await attempt
    ended = await store.jobs.get(job.id)
    assert (ended.status, ended.result) == (JobStatus.COMPLETED, "ok")


async def test_cancel_ends_a_queued_job_and_asks_a_running_one(store: Store, clock: Clock) -> None:
    queued = await store.jobs.create(NewJob("a"))
    clock.advance(1)
    running = await store.jobs.create(NewJob("b", priority=1))
    claim = await store.claimed()
    assert claim.job.id == running.id
    clock.advance(1)
    cancelled = await store.jobs.cancel(queued.id)
    assert (cancelled.status, cancelled.completed_at) == (JobStatus.CANCELLED, clock.now)
    assert cancelled == await store.jobs.get(queued.id)
    asked = await store.jobs.cancel(running.id)
    assert asked.status is JobStatus.RUNNING and asked.cancel_requested
    assert (await store.jobs.renew("w1", [running.id])).cancelled == {running.id}
    assert (await store.jobs.renew("w2", [running.id])).lost == {running.id}
    await store.jobs.finish(claim, JobStatus.CANCELLED)
    assert (await store.jobs.get(running.id)).status is JobStatus.CANCELLED


async def test_a_waiting_job_is_cancelled_at_once_and_forgets_its_question(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    await store.jobs.pause(await store.claimed(), "Proceed?", {})
    cancelled = await store.jobs.cancel(job.id)
    assert (cancelled.status, cancelled.agent_question) == (JobStatus.CANCELLED, None)
    assert not cancelled.cancel_requested


async def test_activity_counts_jobs_created_and_completed_since_a_moment(
    store: Store, clock: Clock
) -> None:
    start = clock.now
    early = await store.jobs.create(NewJob("early"))
    clock.advance(60)
    await store.jobs.create(NewJob("late"))
    claim = await store.claimed()
    assert claim.job.id == early.id
    await store.jobs.finish(claim, JobStatus.COMPLETED, result="r")
    assert await store.jobs.activity_since(start) == {"created": 2, "completed": 1}
    assert await store.jobs.activity_since(start + timedelta(seconds=30)) == {
        "created": 1,
        "completed": 1,
    }
    failing = await store.claimed()
    await store.jobs.finish(failing, JobStatus.FAILED, error="e")  # not completed
    clock.advance(1)
    assert await store.jobs.activity_since(clock.now) == {"created": 0, "completed": 0}


async def test_deleted_jobs_are_gone_with_their_records_and_lines(store: Store) -> None:
    gone = await store.jobs.create(NewJob("gone"))
    kept = await store.jobs.create(NewJob("kept"))
    claim = await store.claimed()
    await store.jobs.append_records(claim, 0, [note("")], logs=[("s1", "line")])
    await store.jobs.finish(claim, JobStatus.COMPLETED)
    await store.jobs.delete([claim.job.id])
    with pytest.raises(JobNotFound):
        await store.jobs.get(claim.job.id)
    assert await store.jobs.records(claim.job.id) == []
    assert await store.logs.page(claim.job.id) == []
    left = kept if claim.job.id == gone.id else gone
    assert await store.jobs.page() == ([await store.jobs.get(left.id)], 1)
    await store.jobs.delete([])  # nothing: no error
