"""Group commit for the job store: every write of this process, in shared transactions.

A job's life is a dozen small writes (created, claimed, a checkpoint per step, its
logs and artifacts, finished), each fenced by the worker's claim. Done one
transaction at a time through the async driver, each statement crossed to the
driver's thread and back, and each commit waited for the one before: 40 jobs a
second on SQLite, the event loop mostly idle. Here a write is a plain function of a
synchronous connection. Writes queue while a batch runs; the next batch takes every
write queued, runs them one after another in one transaction on the writer's own
thread and connection, and commits once. A write that raises fails alone: the
batch's transaction is undone and the batch run again with each write inside a
savepoint, the failing one rolled back to its own and its caller given the error,
the others committed. (Savepoints only then: on PostgreSQL each is two more round
trips per write, and writes fail rarely.) If the commit fails, every write of the
batch fails with it, so nothing is reported written that is not.

On PostgreSQL a writer may have several lanes (each a connection and its thread;
``sql.POSTGRES_WRITE_LANES`` says why it has one), and other processes' writers commit
beside it, so two transactions must never wait on each other's rows. Three rules see
to it:

- Writes about one job go to one lane (``lane_key``, the job's id, picks it by a
  stable hash), so two lanes' single-job writes never touch the same row.
- Writes over many job rows (claims, lease renewals, the sweep) take their rows with
  ``SKIP LOCKED`` and so never wait; they say so (``skips_locked``) and run after the
  batch's other writes. A transaction therefore waits only on a row of its own lane's
  jobs, which another lane holds only through such a write, at the end of a batch
  that waits for nothing more: no cycle can form.
- Should one form anyway (through a write outside these rules: deleting many jobs,
  marking workers dead), PostgreSQL breaks it by failing one transaction
  (``deadlock_detected``); nothing of that batch was committed, so it is run again
  whole, up to ``TRANSIENT_RETRIES`` times.

On PostgreSQL a batch's round trips are what a lane waits for, so writes that can
are run in two steps (``TwoStep``): first every such write of the batch sends its
statement, in psycopg's pipeline mode (queued, not waited for), then, with all of
their answers back in one round trip, each reads its own. A batch of twelve fenced
checkpoints was fourteen round trips (BEGIN, one a write, the COMMIT) and is two.

Callers see what they saw before: ``await write(...)`` returns once the write is
committed (or raises), the events it collected are published after the commit,
and a caller that is cancelled still waits for its write to finish first (a write
once queued runs; the cancellation is delivered after).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from claybot.db.errors import StoreError, as_store_error

log = logging.getLogger(__name__)

T = TypeVar("T")
Events = list[tuple[str, dict[str, Any]]]
Write = Callable[[Connection, Events], T]
# Called in the writer thread with the events of a batch's writes that succeeded, to
# commit the transaction with them: how PostgreSQL's NOTIFY rides along with the
# transaction that made the changes (one NOTIFY for the batch, not one per event, sent
# with the COMMIT). Without events, or without it, the transaction commits as usual.
CommitWith = Callable[[Connection, Events], None]


@dataclass(frozen=True)
class TwoStep(Generic[T]):
    """A write whose statements are sent before any answer is read (see the module's
    docstring): ``send`` sends them and returns what ``receive`` needs to read their
    answers. Called as a plain write, it does both at once."""

    send: Callable[[Connection], Any]
    receive: Callable[[Connection, Any, Events], T]

    def __call__(self, connection: Connection, events: Events) -> T:
        return self.receive(connection, self.send(connection), events)


MAX_BATCH = 500  # writes in one transaction: bounds how long one commit holds the lock
SAVEPOINT = "job_write"
# PostgreSQL's errors that undo a transaction only because of others running beside it
# (deadlock_detected, serialization_failure): the same transaction run again succeeds.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})
TRANSIENT_RETRIES = 3  # a batch is run again at most this many times, then its writes fail


@dataclass
class _Queued:
    action: str
    write: Write[Any]
    future: asyncio.Future[Any]
    skips_locked: bool
    events: Events = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None

    def forget(self) -> None:
        """Before the batch is run again: what its undone run left."""
        self.events.clear()
        self.result = None
        self.error = None


class JobWriter:
    """The writes of one process, over ``lanes`` connections each with its thread
    (one for SQLite, which has one writer at a time anyway). A write about one job goes
    to that job's lane; any other to the lane with the least queued. ``pipeline``: the
    driver is psycopg, and a batch's ``TwoStep`` writes are sent in one pipeline."""

    def __init__(
        self,
        engine: Engine,
        commit_with: CommitWith | None = None,
        *,
        lanes: int = 1,
        pipeline: bool = False,
    ) -> None:
        self.engine = engine
        self._lanes = [_Lane(engine, commit_with, n, pipeline) for n in range(lanes)]
        self._closed = False

    @property
    def batches(self) -> int:
        return sum(lane.batches for lane in self._lanes)

    @property
    def writes(self) -> int:
        return sum(lane.writes for lane in self._lanes)

    @property
    def retries(self) -> int:
        """Batches run again after a transient error (see ``TRANSIENT_SQLSTATES``)."""
        return sum(lane.retries for lane in self._lanes)

    async def write(
        self,
        action: str,
        write: Write[T],
        publish: Callable[[Events], None],
        *,
        lane_key: str | None = None,
        skips_locked: bool = False,
    ) -> T:
        """Run ``write`` in the next batch; its result once committed. ``publish`` gets
        the events it collected, after the commit.

        ``lane_key``: the id of the one job the write is about; every write with that
        key goes to the same lane. ``skips_locked``: the write takes its rows with
        ``SKIP LOCKED`` (it never waits on a row), so it runs after its batch's others.
        """
        if self._closed:
            raise StoreError(f"{action} failed: the job store is closed")
        if lane_key is None:
            lane = min(self._lanes, key=lambda lane: lane.load)
        else:
            # crc32, not hash(): hash() of a str changes from one process to the next,
            # and a job's lane had better be the same in every run of a test.
            lane = self._lanes[zlib.crc32(lane_key.encode()) % len(self._lanes)]
        queued = lane.queue(action, write, skips_locked)
        try:
            result: T = await asyncio.shield(queued.future)
        except asyncio.CancelledError:
            if not queued.future.done():
                with contextlib.suppress(BaseException):
                    await queued.future  # it was queued: it runs to its end first
            raise
        if queued.events:
            publish(queued.events)
        return result

    async def close(self) -> None:
        """Finish what is queued, then stop the threads and close the connections."""
        if self._closed:
            return
        self._closed = True
        for lane in self._lanes:
            await lane.close()
        await asyncio.to_thread(self.engine.dispose)


class _Lane:
    def __init__(
        self, engine: Engine, commit_with: CommitWith | None, number: int, pipeline: bool
    ) -> None:
        self.engine = engine
        self._commit_with = commit_with
        self._pipeline = pipeline  # the driver is psycopg: ``TwoStep`` writes are pipelined
        self._queue: list[_Queued] = []
        self._busy = 0  # writes in the batch being committed
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"job-writer-{number}")
        self._connection: Connection | None = None  # the lane thread's own
        self._closed = False
        self.batches = 0
        self.writes = 0
        self.retries = 0  # counted in the lane's thread, read on the loop: an int is safe

    @property
    def load(self) -> int:
        return len(self._queue) + self._busy

    def queue(self, action: str, write: Write[Any], skips_locked: bool) -> _Queued:
        loop = asyncio.get_running_loop()
        queued = _Queued(action, write, loop.create_future(), skips_locked)
        self._queue.append(queued)
        if self._task is None or self._task.done():
            self._wakeup = asyncio.Event()
            self._task = loop.create_task(self._run(), name="job-writer")
        assert self._wakeup is not None
        self._wakeup.set()
        return queued

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            assert self._wakeup is not None
            self._wakeup.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._disconnect)
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while self._queue or not self._closed:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            self._busy = len(batch)
            try:
                await loop.run_in_executor(self._executor, self._commit, batch)
            except BaseException as exc:  # the loop is closing: nobody waits any more
                for queued in batch:
                    if not queued.future.done():
                        queued.future.set_exception(exc)
                raise
            finally:
                self._busy = 0
            self.batches += 1
            self.writes += len(batch)
            for queued in batch:
                if queued.future.done():
                    continue
                if queued.error is not None:
                    queued.future.set_exception(queued.error)
                else:
                    queued.future.set_result(queued.result)

    # -- the writer thread ---------------------------------------------------------------

    def _commit(self, batch: list[_Queued]) -> None:
        # Those that never wait on a row last: see the module's docstring. Concurrent
        # writes have no order between them, so this changes nothing a caller can see.
        batch = sorted(batch, key=lambda queued: queued.skips_locked)
        for retry in range(TRANSIENT_RETRIES + 1):
            last_try = retry == TRANSIENT_RETRIES
            try:
                self._transaction(batch, last_try=last_try)
                return
            except Exception as exc:
                if last_try or not is_transient(exc):
                    # Nothing of the batch was committed: none of its writes may look written.
                    self._disconnect()
                    for queued in batch:
                        if queued.error is None:
                            queued.error = as_store_error(queued.action, exc)
                            queued.events.clear()
                    return
                self.retries += 1
                log.warning(
                    "a batch of %d job writes met %s and is run again (try %d of %d); "
                    "if this repeats, a write is locking job rows outside the writer's "
                    "rules (see claybot.jobs.writer)",
                    len(batch),
                    type(getattr(exc, "orig", exc)).__name__,
                    retry + 2,
                    TRANSIENT_RETRIES + 1,
                    extra={"action": "job.batch_retried", "writes": len(batch)},
                )
                for queued in batch:
                    queued.forget()

    def _transaction(self, batch: list[_Queued], *, last_try: bool) -> None:
        """The batch in one transaction. A transient error raises out of it (the batch
        is run again), unless this is its ``last_try``: then, as any other error, it
        is the failing write's alone."""
        connection = self._connect()
        if len(batch) == 1:
            self._alone(connection, batch[0], last_try=last_try)
            return
        if not last_try and self._at_once(connection, batch):
            return
        # A write raised (or this is the last try, where a transient error is the
        # failing write's alone): which one fails is settled by savepoints.
        for queued in batch:
            queued.forget()
        with connection.begin():
            for queued in batch:
                self._one(connection, queued, last_try=last_try)
            self._announce(connection, [event for q in batch for event in q.events])

    def _at_once(self, connection: Connection, batch: list[_Queued]) -> bool:
        """The batch without savepoints, committed; False, with nothing committed, if
        one of its writes raised. A transient error raises (the batch is run again)."""
        transaction = connection.begin()
        try:
            # Those sent in one pipeline run first: each is about one job, as are the
            # batch's other plain writes, and the SKIP LOCKED ones still run last.
            pipelined = [q for q in batch if isinstance(q.write, TwoStep)] if self._pipeline else []
            if len(pipelined) > 1:  # one alone gains nothing from a pipeline
                _pipelined(connection, pipelined)
            else:
                pipelined = []
            done = {id(queued) for queued in pipelined}
            for queued in batch:
                if id(queued) not in done:
                    queued.result = queued.write(connection, queued.events)
            self._announce(connection, [event for q in batch for event in q.events])
        except Exception as exc:
            transaction.rollback()
            if is_transient(exc):
                raise
            return False
        transaction.commit()
        return True

    def _alone(self, connection: Connection, queued: _Queued, *, last_try: bool) -> None:
        """A batch of one needs no savepoint: the transaction is the write's own."""
        transaction = connection.begin()
        try:
            queued.result = queued.write(connection, queued.events)
            self._announce(connection, queued.events)
        except Exception as exc:
            transaction.rollback()
            if not last_try and is_transient(exc):
                raise
            queued.error = as_store_error(queued.action, exc)
            queued.events.clear()
            return
        transaction.commit()

    def _one(self, connection: Connection, queued: _Queued, *, last_try: bool) -> None:
        # Savepoints said to the driver itself: SQLAlchemy's own (begin_nested) cost
        # 38 us each here, more than the statements of most writes.
        driver = connection.connection.dbapi_connection
        assert driver is not None
        driver.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            queued.result = queued.write(connection, queued.events)
        except Exception as exc:
            if not last_try and is_transient(exc):
                # Not the write's own failure: the locks the batch holds are what closed
                # the cycle, so trying this write again inside it would close it again.
                raise
            # If this fails too, the connection is gone: the batch fails as a whole.
            driver.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            driver.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
            queued.error = as_store_error(queued.action, exc)
            queued.events.clear()
            return
        driver.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")

    def _announce(self, connection: Connection, events: Events) -> None:
        """Just before the commit: ``commit_with`` sends the events and commits (the
        driver then knows it committed, and SQLAlchemy's commit after this sends
        nothing)."""
        if events and self._commit_with is not None:
            self._commit_with(connection, events)

    def _connect(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self.engine.connect()
        return self._connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None


def _pipelined(connection: Connection, batch: list[_Queued]) -> None:
    """The batch's ``TwoStep`` writes: all sent in one pipeline, then each reads its
    answers. A statement that fails raises here, for the whole pipeline (PostgreSQL
    skips the rest of it): the caller undoes the batch and runs it again write by
    write."""
    driver = connection.connection.dbapi_connection
    assert driver is not None
    with driver.pipeline():
        sent = [cast(TwoStep[Any], queued.write).send(connection) for queued in batch]
    for queued, handle in zip(batch, sent, strict=True):
        queued.result = cast(TwoStep[Any], queued.write).receive(connection, handle, queued.events)


def is_transient(exc: BaseException) -> bool:
    """A PostgreSQL error that undid the transaction only because of others beside it
    (SQLAlchemy's, or the driver's own from a pipeline)."""
    error = exc.orig if isinstance(exc, DBAPIError) else exc
    return getattr(error, "sqlstate", None) in TRANSIENT_SQLSTATES
