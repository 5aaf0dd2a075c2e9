"""The job store's contract for claims: the order they take jobs in, leases, renewals,
the sweep of jobs whose worker was lost, and giving a job back."""

from __future__ import annotations

import asyncio

import pytest

from claybot.jobs.model import JobStatus, LeaseLost, NewJob
from tests.jobs.conftest import Clock
from tests.jobs.contract.conftest import LEASE, Store, note, user_message


async def test_claims_take_priority_then_age_and_none_when_empty(
    store: Store, clock: Clock
) -> None:
    for task, priority in [("old", 0), ("urgent", 5), ("new", 0)]:
        await store.jobs.create(NewJob(task, priority=priority))
        clock.advance(1)
    order = [(await store.claimed()).job.task for _ in range(3)]
    assert order == ["urgent", "old", "new"]
    assert await store.jobs.claim("w1") is None


async def test_a_claim_runs_the_job_under_its_worker_and_attempt(
    store: Store, clock: Clock
) -> None:
    job = await store.jobs.create(NewJob("t"))
    clock.advance(5)
    claim = await store.claimed("w7")
    assert (claim.worker_id, claim.attempt, claim.attachments) == ("w7", 1, ())
    assert claim.job == await store.jobs.get(job.id)
    assert (claim.job.status, claim.job.worker_id, claim.job.attempt) == (
        JobStatus.RUNNING,
        "w7",
        1,
    )
    assert claim.job.started_at == claim.job.updated_at == clock.now


async def test_many_claimed_at_once_come_in_claim_order_up_to_the_limit(
    store: Store, clock: Clock
) -> None:
    for n in range(5):
        await store.jobs.create(NewJob(f"job {n}", priority=n % 2))
        clock.advance(1)
    claims = await store.jobs.claim_many("w1", 4)
    assert [claim.job.task for claim in claims] == ["job 1", "job 3", "job 0", "job 2"]
    assert await store.jobs.claim_many("w1", 0) == []
    [last] = await store.jobs.claim_many("w2", 10)
    assert (last.job.task, last.worker_id) == ("job 4", "w2")
    assert await store.jobs.claim_many("w1", 10) == []


async def test_concurrent_claimers_take_each_job_once(store: Store) -> None:
    for n in range(30):
        await store.jobs.create(NewJob(f"job {n}"))

    async def claimer(worker: str) -> list[str]:
        taken = []
        while (claim := await store.jobs.claim(worker)) is not None:
            taken.append(claim.job.id)
        return taken

    results = await asyncio.gather(*(claimer(f"w{n}") for n in range(6)))
    everything = [job_id for taken in results for job_id in taken]
    assert len(everything) == 30 == len(set(everything))


async def test_a_lost_lease_is_requeued_and_the_old_workers_writes_are_refused(
    store: Store, clock: Clock
) -> None:
    job = await store.jobs.create(NewJob("t"))
    first = await store.claimed("dead")
    await store.jobs.append_records(first, 0, [user_message("t")])
    clock.advance(31)  # its heartbeat stopped: the lease ran out
    swept = await store.jobs.sweep()
    assert (swept.requeued, swept.failed, swept.cancelled) == ([job.id], [], [])
    again = await store.jobs.get(job.id)
    assert (again.status, again.retry_count, again.worker_id) == (JobStatus.QUEUED, 1, None)
    second = await store.claimed("alive")
    assert second.attempt == 2
    # The dead worker wakes up and writes: nothing of it lands.
    with pytest.raises(LeaseLost):
        await store.jobs.append_records(first, 1, [note("late")])
    with pytest.raises(LeaseLost):
        await store.jobs.finish(first, JobStatus.COMPLETED, result="late")
    with pytest.raises(LeaseLost):
        await store.logs.add(job.id, "late", claim=first)
    with pytest.raises(LeaseLost):
        await store.jobs.pause(first, "late?", {})
    with pytest.raises(LeaseLost):
        await store.jobs.release(first)
    with pytest.raises(LeaseLost):
        await store.jobs.record_discovered(first, ["late-pkg"])
    assert (await store.jobs.renew("dead", [job.id])).lost == {job.id}
    await store.jobs.finish(second, JobStatus.COMPLETED, result="done")
    final = await store.jobs.get(job.id)
    assert (final.status, final.result, final.tools_discovered) == (
        JobStatus.COMPLETED,
        "done",
        None,
    )
    assert await store.jobs.records(job.id) == [user_message("t")]
    assert [line.message for line in await store.logs.page(job.id)] == ["Job created"]


async def test_a_claim_of_an_earlier_attempt_is_refused_to_the_same_worker(
    store: Store, clock: Clock
) -> None:
    """The fence names the attempt, not only the worker: a worker that stalled past
    its lease and claimed the job again must not write under its old claim."""
    job = await store.jobs.create(NewJob("t"))
    old = await store.claimed("w1")
    clock.advance(31)
    await store.jobs.sweep()
    new = await store.claimed("w1")
    assert (new.job.id, new.attempt) == (job.id, 2)
    with pytest.raises(LeaseLost):
        await store.jobs.append_records(old, 0, [note("stale")])
    with pytest.raises(LeaseLost):
        await store.jobs.finish(old, JobStatus.COMPLETED)
    await store.jobs.append_records(new, 0, [note("fresh")])
    assert await store.jobs.records(job.id) == [note("fresh")]


async def test_a_lease_runs_its_length_and_no_longer(store: Store, clock: Clock) -> None:
    job = await store.jobs.create(NewJob("t"))
    await store.claimed()
    clock.advance(LEASE.total_seconds())
    assert (await store.jobs.sweep()).requeued == []  # ran out only once past it
    clock.advance(1)
    assert (await store.jobs.sweep()).requeued == [job.id]


async def test_a_renewed_lease_is_not_swept(store: Store, clock: Clock) -> None:
    job = await store.jobs.create(NewJob("t"))
    await store.claimed()
    clock.advance(20)
    renewal = await store.jobs.renew("w1", [job.id])
    assert renewal.cancelled == renewal.lost == set()
    clock.advance(20)
    assert (await store.jobs.sweep()).requeued == []
    clock.advance(11)
    assert (await store.jobs.sweep()).requeued == [job.id]


async def test_a_fenced_write_extends_the_lease(store: Store, clock: Clock) -> None:
    job = await store.jobs.create(NewJob("t"))
    claim = await store.claimed()
    clock.advance(20)
    await store.jobs.append_records(claim, 0, [note("")])
    clock.advance(20)
    await store.logs.add(job.id, "still here", claim=claim)
    clock.advance(20)
    assert (await store.jobs.sweep()).requeued == []
    assert (await store.jobs.get(job.id)).updated_at == clock.now - LEASE / 1.5


async def test_renewals_tell_what_the_worker_no_longer_holds(store: Store) -> None:
    mine = await store.jobs.create(NewJob("mine", priority=1))
    theirs = await store.jobs.create(NewJob("theirs"))
    await store.claimed("w1")
    await store.claimed("w2")
    renewal = await store.jobs.renew("w1", [mine.id, theirs.id, "no-such-job"])
    assert (renewal.cancelled, renewal.lost) == (set(), {theirs.id, "no-such-job"})
    empty = await store.jobs.renew("w1", [])
    assert (empty.cancelled, empty.lost) == (set(), set())


async def test_retries_spent_fail_the_job(store: Store, clock: Clock) -> None:
    job = await store.jobs.create(NewJob("t", max_retries=1))
    for _ in range(2):
        await store.claimed()
        clock.advance(31)
        await store.jobs.sweep()
    final = await store.jobs.get(job.id)
    assert final.status is JobStatus.FAILED and final.retry_count == 1
    assert final.completed_at == clock.now
    assert "retries" in (final.error_message or "")
    assert await store.jobs.claim("w1") is None


async def test_a_cancelled_job_whose_worker_died_is_swept_to_cancelled(
    store: Store, clock: Clock
) -> None:
    job = await store.jobs.create(NewJob("t", max_retries=0))  # a cancel wins over failing
    await store.claimed()
    await store.jobs.cancel(job.id)
    clock.advance(31)
    swept = await store.jobs.sweep()
    assert (swept.requeued, swept.failed, swept.cancelled) == ([], [], [job.id])
    assert (await store.jobs.get(job.id)).status is JobStatus.CANCELLED


async def test_a_released_job_is_queued_again_with_its_retries_untouched(store: Store) -> None:
    job = await store.jobs.create(NewJob("t"))
    first = await store.claimed("draining")
    await store.jobs.append_records(first, 0, [note("a")])
    await store.jobs.release(first)
    released = await store.jobs.get(job.id)
    assert (released.status, released.worker_id, released.retry_count) == (
        JobStatus.QUEUED,
        None,
        0,
    )
    with pytest.raises(LeaseLost):
        await store.jobs.finish(first, JobStatus.COMPLETED)
    second = await store.claimed("next")
    assert (second.job.id, second.attempt) == (job.id, 2)
    assert second.job.started_at == first.job.started_at  # when it first started
    assert await store.jobs.records(job.id) == [note("a")]
