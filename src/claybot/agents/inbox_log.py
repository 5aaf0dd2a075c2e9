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

from claybot.agents.inbox import (
    InboxItem,
    ItemKey,
    done_record,
    pending_records,
    sent_record,
    unfinished,
)
from claybot.durable.atomic import atomic_write_bytes
from claybot.durable.group_commit import GroupCommitWriter, replay_journal
from claybot.durable.jsonl import encode_record, read_jsonl

# Checkpoint once this many inbox records were appended since the last one.
COMPACT_AFTER_RECORDS = 100_000


class InboxLog:
    """``InboxStore`` on the log; ``root`` is the folder the journal's paths are in
    (the writer's)."""

    def __init__(self, path: Path, writer: GroupCommitWriter, *, root: Path) -> None:
        self.path = path
        self.writer = writer
        self._root = root
        self._pending: dict[ItemKey, InboxItem] = {}
        self._sent: dict[ItemKey, set[str]] = {}
        self._appended = 0
        self._compacting = False

    async def recover(self) -> list[InboxItem]:
        """Restore the journaled appends agent files lost, then read the log back (before
        the writer appends to it) and rewrite it with only the unfinished items."""
        return await asyncio.to_thread(self._recover)

    def _recover(self) -> list[InboxItem]:
        replay_journal(self.path, self._root)
        self._pending, self._sent = unfinished(read_jsonl(self.path).records)
        self._rewrite()
        return list(self._pending.values())

    def pending_item(self, agent_id: str, item_id: str) -> InboxItem | None:
        return self._pending.get((agent_id, item_id))

    def already_sent(self, key: ItemKey, outgoing_id: str) -> bool:
        return outgoing_id in self._sent.get(key, ())

    def accept(self, item: InboxItem) -> asyncio.Future[None]:
        self._pending[item.key] = item
        self._count()
        return self.writer.append(self.path, encode_record(item.to_record()))

    def forget(self, item: InboxItem) -> None:
        self._pending.pop(item.key, None)

    def mark_sent(self, key: ItemKey, outgoing_id: str) -> None:
        self._sent.setdefault(key, set()).add(outgoing_id)
        self.writer.append_nowait(self.path, encode_record(sent_record(key, outgoing_id)))
        self._count()

    def mark_done(self, item: InboxItem) -> None:
        self._pending.pop(item.key, None)
        self._sent.pop(item.key, None)
        self.writer.append_nowait(self.path, encode_record(done_record(item)))
        self._count()

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def _count(self) -> None:
        self._appended += 1
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

    @property
    def appended_since_checkpoint(self) -> int:
        return self._appended

    def _rewrite(self) -> None:
        chunks = [encode_record(record) for record in pending_records(self._pending, self._sent)]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, b"".join(chunks))
