"""A job's transcript: the turn loop's records as rows of ``job_records``.

It keeps the agents' transcript contract (``claybot.agents.transcript``), so a job
runs the very loop an agent runs. What it adds is where durability is paid for:
an agent's history is synced in group commits, while a job's rows are committed
at every checkpoint the loop calls (after each tool result) and at every durable
append (each model answer), in a transaction fenced by the worker's claim. A job
therefore resumes on another machine from its last step, and a worker that lost
its claim writes nothing.

Delivering a reply means writing it to the job's log under the reply's id
(``step_key``), so ``delivered`` is known from the log, and a step run again
after a crash does not log twice.
"""

from __future__ import annotations

from claybot.agents.history import of_turn
from claybot.agents.records import DamagedRecord, HistoryRecord
from claybot.jobs.database import JobDatabase
from claybot.jobs.model import Claim
from claybot.jobs.port import Checkpoint, NewArtifact


class JobTranscript:
    def __init__(
        self,
        db: JobDatabase,
        claim: Claim,
        rows: list[HistoryRecord],
        delivered: set[str],
    ) -> None:
        self._db = db
        self._claim = claim
        # A row that is no record of its type (a ``DamagedRecord``) is left out, but
        # still numbered (``_rows``): the next checkpoint's rows follow it.
        self._written: list[HistoryRecord] = [
            record for record in rows if not isinstance(record, DamagedRecord)
        ]
        self._rows = len(rows)
        self._queued: list[HistoryRecord] = []  # never a DamagedRecord: readers make it
        self._delivered = set(delivered)
        self._logs: list[tuple[str, str]] = []  # (step key, line) for the next checkpoint
        self._artifact: NewArtifact | None = None  # for the next checkpoint
        self._noted = 0

    @classmethod
    async def open(cls, db: JobDatabase, claim: Claim) -> JobTranscript:
        if claim.attempt == 1:
            # The first claim ever: nothing was written under an earlier one.
            return cls(db, claim, [], set())
        records = await db.jobs.records(claim.job.id)
        delivered = await db.logs.step_keys(claim.job.id)
        return cls(db, claim, records, delivered)

    def log(self, line: str) -> None:
        """A line for the job's log, written with the next checkpoint (keyed, so a
        checkpoint sent again does not write it twice)."""
        self._noted += 1
        self._logs.append((f"note:{self._claim.attempt}:{self._noted}", line))

    async def stage_artifact(self, artifact: NewArtifact) -> None:
        """An artifact to store with the next checkpoint: a tool's effect written in one
        transaction with the call that made it and the result it gave (the checkpoint
        the turn loop takes after each tool), all or nothing. A checkpoint holds one;
        one staged before is written first."""
        if self._artifact is not None:
            await self.checkpoint()
        self._artifact = artifact

    def append(self, record: HistoryRecord) -> None:
        self._queued.append(record)

    async def append_durably(self, record: HistoryRecord) -> None:
        self._queued.append(record)
        await self.checkpoint()

    async def checkpoint(self, *, clear_answer: bool = False) -> None:
        """What waits for a checkpoint, written in one fenced transaction."""
        if not self._queued and not self._logs and self._artifact is None and not clear_answer:
            return
        queued = self._queued
        pending = Checkpoint(self._rows, queued, self._logs, self._artifact)
        self._queued, self._logs, self._artifact = [], [], None
        try:
            await self._db.jobs.append_records(
                self._claim,
                pending.first_seq,
                pending.records,
                clear_answer=clear_answer,
                logs=pending.logs,
                artifact=pending.artifact,
            )
        except BaseException:
            # Cancelled as it committed, or failed: sent again with the next checkpoint
            # (the store skips records it already holds, the same, under their numbers,
            # and log lines whose keys it has; an artifact written again is replaced).
            self._queued[:0] = queued
            self._logs[:0] = pending.logs
            self._artifact = self._artifact or pending.artifact
            raise
        self._written.extend(queued)
        self._rows += len(queued)

    def take(self) -> Checkpoint:
        """What waits for a checkpoint, to be written with the job's ending instead; it
        counts as written from now on."""
        checkpoint = Checkpoint(self._rows, self._queued, self._logs, self._artifact)
        self._written.extend(self._queued)
        self._rows += len(self._queued)
        self._queued, self._logs, self._artifact = [], [], None
        return checkpoint

    async def read(self) -> list[HistoryRecord]:
        return [*self._written, *self._queued]

    async def read_turn(self, item_id: str) -> list[HistoryRecord]:
        return of_turn(await self.read(), item_id)

    def delivered(self, item_id: str, outgoing_id: str) -> bool:
        return outgoing_id in self._delivered

    def mark_delivered(self, item_id: str, outgoing_id: str) -> None:
        self._delivered.add(outgoing_id)
