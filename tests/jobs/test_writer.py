"""The job store's group commit: writes share transactions, and each still stands alone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from psycopg.errors import DeadlockDetected
from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError, OperationalError

from claybot.db.database import create_database_engine, migrate
from claybot.db.driver_statement import DriverStatement, Sent
from claybot.db.errors import StoreError
from claybot.db.tables import workers
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import NewJob
from claybot.jobs.signals import JobSignals
from claybot.jobs.sql import NOTIFY_SHORT_TEXT, notify_bodies
from claybot.jobs.writer import TRANSIENT_RETRIES, Events, TwoStep

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def add_worker(name: str, *, fail: bool = False) -> Any:
    def write(connection: Connection, events: Events) -> str:
        connection.execute(
            insert(workers).values(
                id=name, hostname="h", pid=1, version="v", status="active", active_jobs=0,
                last_heartbeat=NOW, created_at=NOW,
            )
        )  # fmt: skip
        events.append(("test.added", {"name": name}))
        if fail:
            raise ValueError(f"{name} changed its mind")
        return name

    return write


async def names(db: JobDatabase) -> set[str]:
    async with db.tables.engine.connect() as connection:
        return {row.id for row in await connection.execute(select(workers.c.id))}


async def test_writes_queued_together_commit_in_one_batch_and_a_failing_one_alone_is_undone(
    jobs_db: JobDatabase,
) -> None:
    heard: list[str] = []
    jobs_db.tables.subscribe(lambda kind, payload: heard.append(payload["name"]))
    writer = jobs_db.tables.writer
    batches = writer.batches
    results = await asyncio.gather(
        *(jobs_db.tables.write("adding", add_worker(f"w{n}", fail=n == 2)) for n in range(5)),
        return_exceptions=True,
    )
    assert results[:2] == ["w0", "w1"] and results[3:] == ["w3", "w4"]
    assert isinstance(results[2], ValueError)
    assert writer.batches - batches < 5  # they shared transactions
    assert await names(jobs_db) == {"w0", "w1", "w3", "w4"}
    assert sorted(heard) == ["w0", "w1", "w3", "w4"]  # nothing heard of the undone one


async def test_a_driver_error_is_a_store_error_and_the_next_write_goes_through(
    jobs_db: JobDatabase,
) -> None:
    await jobs_db.tables.write("adding", add_worker("twice"))
    with pytest.raises(StoreError, match="adding again failed") as raised:
        await jobs_db.tables.write("adding again", add_worker("twice"))  # primary key
    assert isinstance(raised.value.__cause__, IntegrityError)
    await jobs_db.tables.write("adding", add_worker("after"))
    assert await names(jobs_db) == {"twice", "after"}


async def test_a_cancelled_caller_still_waits_for_its_write_to_commit(
    jobs_db: JobDatabase,
) -> None:
    creating = asyncio.create_task(jobs_db.jobs.create(NewJob("cancelled while queued")))
    await asyncio.sleep(0)  # queued now
    creating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await creating
    jobs, total = await jobs_db.jobs.page()
    assert total == 1 and jobs[0].task == "cancelled while queued"


async def test_a_closed_store_refuses_writes_clearly(jobs_db: JobDatabase) -> None:
    await jobs_db.close()
    with pytest.raises(StoreError, match="closed"):
        await jobs_db.jobs.create(NewJob("too late"))


def test_a_batch_of_events_is_told_in_notifies_that_fit_and_say_it_all() -> None:
    events = [("job.log", {"jobId": f"j{n}", "message": "x" * 300}) for n in range(60)]
    bodies = notify_bodies("me", events)
    assert len(bodies) > 1
    assert all(len(body.encode()) < 8000 for body in bodies)
    told = [event for body in bodies for event in json.loads(body)["events"]]
    assert [(e["type"], e["payload"]) for e in told] == [(k, p) for k, p in events]
    assert {json.loads(body)["origin"] for body in bodies} == {"me"}


@contextlib.asynccontextmanager
async def two_processes(url: str) -> AsyncIterator[tuple[JobDatabase, JobSignals]]:
    """Two job databases on one PostgreSQL database stand for two processes: one
    writes, the other's signals listen (connected when this yields)."""
    engines = [create_database_engine(url) for _ in range(2)]
    await migrate(engines[0])
    writer, listener = JobDatabase(engines[0]), JobDatabase(engines[1])
    signals = JobSignals(listener.tables)
    signals.start()
    try:
        async with asyncio.timeout(10):
            await signals.connected.wait()
        yield writer, signals
    finally:
        await signals.close()
        for db in (writer, listener):
            await db.close()
        for engine in engines:
            await engine.dispose()


async def log_and_hear(
    writer: JobDatabase, signals: JobSignals, lines: list[str]
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Log ``lines`` for a new job in one process: the job.log payloads the other heard
    (waited for, one per line) and the job's log as written."""
    heard: list[dict[str, Any]] = []
    signals.subscribe(lambda kind, payload: heard.append(payload) if kind == "job.log" else None)
    job = await writer.jobs.create(NewJob("t"))
    for line in lines:
        await writer.logs.add(job.id, line)
    async with asyncio.timeout(10):
        while len(heard) < len(lines):
            await asyncio.sleep(0.01)
    return heard, await writer.logs.page(job.id)


async def test_another_process_hears_every_event_of_a_batch(
    fresh_postgres_url: str,
) -> None:
    async with two_processes(fresh_postgres_url) as (writer, signals):
        heard: list[str] = []
        signals.subscribe(lambda kind, payload: heard.append(str(payload.get("jobId"))))
        created = await asyncio.gather(*(writer.jobs.create(NewJob(f"t{n}")) for n in range(20)))
        async with asyncio.timeout(10):
            while len(heard) < 20:
                await asyncio.sleep(0.01)
        assert sorted(heard) == sorted(job.id for job in created)


async def test_a_notified_line_arrives_as_written_whatever_it_holds(
    fresh_postgres_url: str,
) -> None:
    """The NOTIFYs go with the COMMIT as one query with their payloads quoted in: quotes,
    backslashes, a statement's end and other scripts' letters must arrive unchanged."""
    lines = [
        "it's \\'; COMMIT; SELECT pg_notify('x', 'y'); --",
        "a \"quoted\" $$dollar$$ E'\\x41' line",
        "Ünïcødé ✓ 日本語 \t tab\nnewline",
    ]
    async with two_processes(fresh_postgres_url) as (writer, signals):
        heard, written = await log_and_hear(writer, signals, lines)
        assert [payload["message"] for payload in heard] == lines
        assert [line.message for line in written] == ["Job created", *lines]


async def test_a_line_too_long_for_a_notify_is_written_whole_and_heard_shortened(
    fresh_postgres_url: str,
) -> None:
    """PostgreSQL refuses a NOTIFY of 8,000 bytes, and with it the commit: a log line of
    9,000 characters failed to be written at all."""
    lines = ["x" * 9_000, "日本" * 3_000]  # the second is 36,000 bytes as JSON escapes
    async with two_processes(fresh_postgres_url) as (writer, signals):
        heard, written = await log_and_hear(writer, signals, lines)
        assert [line.message for line in written] == ["Job created", *lines]
        for payload, line, row in zip(heard, lines, written[1:], strict=True):
            assert payload["truncated"] is True and payload["id"] == row.id
            assert payload["message"] == line[:NOTIFY_SHORT_TEXT] + "…"


def test_an_event_too_large_even_shortened_is_told_by_its_job_alone() -> None:
    payload = {"jobId": "j1", **{f"field{n}": "y" * NOTIFY_SHORT_TEXT for n in range(30)}}
    (body,) = notify_bodies("me", [("job.log", payload)])
    assert len(body.encode()) < 8000
    assert json.loads(body)["events"] == [
        {"type": "job.log", "payload": {"jobId": "j1", "truncated": True}}
    ]


def deadlocking(name: str, times: int, tries: list[str]) -> Any:
    """``add_worker(name)``, which PostgreSQL picks as a deadlock's victim its first
    ``times`` runs (after the row is written: the retry must undo it)."""
    add = add_worker(name)

    def write(connection: Connection, events: Events) -> str:
        tries.append(name)
        added: str = add(connection, events)
        if tries.count(name) <= times:
            raise OperationalError("UPDATE job_queue ...", None, DeadlockDetected("deadlock"))
        return added

    return write


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "in-a-batch"])
async def test_a_batch_undone_by_a_deadlock_is_run_again_whole(
    jobs_db: JobDatabase, caplog: pytest.LogCaptureFixture, alone: bool
) -> None:
    heard: list[str] = []
    jobs_db.tables.subscribe(lambda kind, payload: heard.append(payload["name"]))
    tries: list[str] = []
    writes = [deadlocking("victim", 1, tries)] + ([] if alone else [add_worker("bystander")])
    with caplog.at_level(logging.WARNING, logger="claybot.jobs.writer"):
        # One job's writes: one lane, so one batch.
        results = await asyncio.gather(
            *(jobs_db.tables.write("adding", write, job_id="j1") for write in writes)
        )
    expected = ["victim"] if alone else ["victim", "bystander"]
    assert results == expected
    assert tries == ["victim", "victim"]
    assert await names(jobs_db) == set(expected)
    assert sorted(heard) == sorted(expected)  # each once: the undone run's events are gone
    assert jobs_db.tables.writer.retries == 1
    assert "run again" in caplog.text


async def test_a_batch_deadlocked_every_time_fails_only_the_victim_in_the_end(
    jobs_db: JobDatabase,
) -> None:
    tries: list[str] = []
    victim, bystander = await asyncio.gather(
        jobs_db.tables.write("adding", deadlocking("victim", 99, tries), job_id="j1"),
        jobs_db.tables.write("adding", add_worker("bystander"), job_id="j1"),
        return_exceptions=True,
    )
    assert isinstance(victim, StoreError) and "DeadlockDetected" in str(victim)
    assert bystander == "bystander"
    assert len(tries) == TRANSIENT_RETRIES + 1
    assert await names(jobs_db) == {"bystander"}


async def test_one_jobs_writes_share_a_lane_and_rows_skipped_locked_go_last(
    jobs_db: JobDatabase,
) -> None:
    ran: list[tuple[str, str]] = []

    def noting(name: str) -> Any:
        def write(_connection: Connection, _events: Events) -> None:
            ran.append((name, threading.current_thread().name))

        return write

    await asyncio.gather(
        jobs_db.tables.write("renewing", noting("skips locked"), skips_locked=True, job_id="j1"),
        *(jobs_db.tables.write("fencing", noting(f"fence {n}"), job_id="j1") for n in range(6)),
    )
    assert len({thread for _, thread in ran}) == 1
    assert [name for name, _ in ran] == [*(f"fence {n}" for n in range(6)), "skips locked"]


ADD_WORKER = DriverStatement(
    insert(workers), ("id", "hostname", "pid", "version", "status", "active_jobs",
                      "last_heartbeat", "created_at")
)  # fmt: skip


def add_worker_in_two_steps(name: str, steps: list[str]) -> TwoStep[str]:
    def send(connection: Connection) -> Sent:
        steps.append(f"send {name}")
        return ADD_WORKER.send(
            connection,
            {"id": name, "hostname": "h", "pid": 1, "version": "v", "status": "active",
             "active_jobs": 0, "last_heartbeat": NOW, "created_at": NOW},
        )  # fmt: skip

    def receive(_connection: Connection, sent: Sent, events: Events) -> str:
        steps.append(f"receive {name}")
        assert sent.ran().rowcount == 1
        events.append(("test.added", {"name": name}))
        return name

    return TwoStep(send, receive)


async def test_two_step_writes_of_a_batch_are_all_sent_before_any_answer_is_read_on_postgres(
    jobs_db: JobDatabase,
) -> None:
    heard: list[str] = []
    jobs_db.tables.subscribe(lambda kind, payload: heard.append(payload["name"]))
    steps: list[str] = []
    names_ = [f"w{n}" for n in range(4)]
    # One job's writes (one lane), queued in one loop step: one batch.
    results = await asyncio.gather(
        *(
            jobs_db.tables.write("adding", add_worker_in_two_steps(name, steps), job_id="j1")
            for name in names_
        )
    )
    assert results == names_
    if jobs_db.tables.postgres:  # one pipeline: one round trip for all four
        assert steps == [f"send {name}" for name in names_] + [f"receive {n}" for n in names_]
    else:
        assert steps == [step for name in names_ for step in (f"send {name}", f"receive {name}")]
    assert await names(jobs_db) == set(names_)
    assert sorted(heard) == names_


async def test_a_two_step_write_that_fails_in_the_pipeline_fails_alone(
    jobs_db: JobDatabase,
) -> None:
    await jobs_db.tables.write("adding", add_worker("taken"))
    heard: list[str] = []
    jobs_db.tables.subscribe(lambda kind, payload: heard.append(payload["name"]))
    steps: list[str] = []
    results = await asyncio.gather(
        *(
            jobs_db.tables.write("adding", add_worker_in_two_steps(name, steps), job_id="j1")
            for name in ("a", "taken", "b")
        ),
        return_exceptions=True,
    )
    assert results[0] == "a" and results[2] == "b"
    assert isinstance(results[1], StoreError) and "adding failed" in str(results[1])
    assert isinstance(results[1].__cause__, IntegrityError)  # SQLAlchemy's, as from execute
    assert await names(jobs_db) == {"taken", "a", "b"}
    assert sorted(heard) == ["a", "b"]  # each once: nothing of the undone pipeline is heard
