"""The inbox store on files: one write-ahead log, ``agents/inbox.wal``.

Every item is appended to it and made durable (group commit) before it is
acknowledged; its ``sent`` and ``done`` records follow (see ``inbox.py``). One
shared log instead of a file per agent: one sync covers the messages of every agent
in a batch, which is what lets thousands of messages per second be durable. The
same file is the writer's journal (redo records of history and index appends, see
``claybot.durable.group_commit``); a checkpoint rewrites it with only the unfinished
items.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from claybot.agents.inbox import InboxItem, InboxRecord
from claybot.agents.inbox_ledger import InboxLedger
from claybot.durable.atomic import atomic_write_bytes
from claybot.durable.group_commit import GroupCommitWriter, replay_journal
from claybot.durable.jsonl import encode_record, read_jsonl

# Checkpoint once this many inbox records were appended since the last one.
COMPACT_AFTER_RECORDS = 100_000


class InboxLog(InboxLedger):
    """``InboxStore`` on the log; ``root`` is the folder the journal's paths are in
    (the writer's)."""

    def __init__(self, path: Path, writer: GroupCommitWriter, *, root: Path) -> None:
        super().__init__()
        self.path = path
        self.writer = writer
        self._root = root
        self._compacting = False

    async def recover(self) -> list[InboxItem]:
        """Restore the journaled appends agent files lost, then read the log back (before
        the writer appends to it) and rewrite it with only the unfinished items."""
        return await asyncio.to_thread(self._recover)

    def _recover(self) -> list[InboxItem]:
        replay_journal(self.path, self._root)
        items = self._restore(read_jsonl(self.path).records)
        self._rewrite()
        return items

    def _write(self, record: InboxRecord) -> asyncio.Future[None]:
        return self.writer.append(self.path, encode_record(record))

    def _write_nowait(self, record: InboxRecord) -> None:
        self.writer.append_nowait(self.path, encode_record(record))

    def _appended_one(self) -> None:
        super()._appended_one()
        if self._appended >= COMPACT_AFTER_RECORDS and not self._compacting:
            self._compacting = True
            asyncio.get_running_loop().create_task(self._compact())

    async def checkpoint(self) -> None:
        """Sync the journaled files, then rewrite the log with only unfinished items."""
        await self._compact()

    async def _compact(self) -> None:
        self._compacting = True
        try:
            # No batch is in flight during a checkpoint; records still queued land
            # in the new file after it (recovery de-duplicates).
            await self.writer.checkpoint(self._rewrite)
            self._appended = 0
        finally:
            self._compacting = False

    def _rewrite(self) -> None:
        chunks = [encode_record(record) for record in self._kept_records()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, b"".join(chunks))
