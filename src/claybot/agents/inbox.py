"""Durable inboxes.

Every item an agent must process (an inbound message, a reset) is appended to
one write-ahead log, ``agents/inbox.wal``, and made durable (group commit)
before it is acknowledged. The log also records ``sent`` (an outgoing message
was delivered) and ``done`` (the item was processed). At boot, items without
``done`` go back into their agents' inboxes; the agent's history decides what
of the turn already happened, so nothing is processed twice.

One shared log instead of a file per agent: one sync covers the messages of
every agent in a batch, which is what lets thousands of messages per second be
durable. The same file is the writer's journal (redo records of history and
index appends, see ``claybot.durable.group_commit``); a checkpoint rewrites it
with only the unfinished items.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from claybot.agents.turn import Turn
from claybot.durable.atomic import atomic_write_bytes
from claybot.durable.group_commit import GroupCommitWriter, replay_journal
from claybot.durable.jsonl import encode_record, read_jsonl

ItemKind = Literal["message", "reset", "revoke"]
ITEM_KINDS = frozenset({"message", "reset", "revoke"})
# Checkpoint once this many inbox records were appended since the last one.
COMPACT_AFTER_RECORDS = 100_000


@dataclass
class InboxItem:
    kind: ItemKind
    id: str
    agent_id: str
    at: int
    text: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    # Runtime only: resolves when the item is durable; the handle posters wait on.
    durable: asyncio.Future[None] | None = None
    turn: Turn = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.turn = Turn(self.agent_id, self.id)

    @property
    def key(self) -> tuple[str, str]:
        return (self.agent_id, self.id)

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "op": self.kind,
            "agentId": self.agent_id,
            "id": self.id,
            "at": self.at,
        }
        if self.text:
            record["text"] = self.text
        if self.context:
            record["context"] = self.context
        return record

    @staticmethod
    def from_record(record: dict[str, Any]) -> InboxItem:
        return InboxItem(
            kind=record["op"],
            id=str(record["id"]),
            agent_id=str(record["agentId"]),
            at=int(record.get("at", 0)),
            text=str(record.get("text", "")),
            context=dict(record.get("context") or {}),
        )


class AgentInbox:
    """One agent's queue, in acceptance order."""

    def __init__(self) -> None:
        self._items: deque[InboxItem] = deque()

    def push(self, item: InboxItem) -> None:
        self._items.append(item)

    def pop(self) -> InboxItem | None:
        return self._items.popleft() if self._items else None

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[InboxItem]:
        return iter(self._items)


class InboxLog:
    def __init__(self, path: Path, writer: GroupCommitWriter) -> None:
        self.path = path
        self.writer = writer
        self._pending: dict[tuple[str, str], InboxItem] = {}
        self._sent: dict[tuple[str, str], set[str]] = {}
        self._appended = 0
        self._compacting = False

    def replay(self, root: Path) -> int:
        """Before anything reads agent files: restore journaled appends they lost."""
        return replay_journal(self.path, root)

    def recover(self) -> list[InboxItem]:
        """Read the log (after ``replay``, before the writer runs); return unfinished items."""
        pending: dict[tuple[str, str], InboxItem] = {}
        sent: dict[tuple[str, str], set[str]] = {}
        finished: set[tuple[str, str]] = set()
        for record in read_jsonl(self.path).records:
            op = record.get("op")
            try:
                key = (str(record["agentId"]), str(record["id"]))
            except KeyError:
                continue
            if op in ITEM_KINDS:
                if key not in finished and key not in pending:
                    pending[key] = InboxItem.from_record(record)
            elif op == "sent":
                sent.setdefault(key, set()).add(str(record.get("outgoingId")))
            elif op == "done":
                finished.add(key)
                pending.pop(key, None)
        self._pending = pending
        self._sent = {key: ids for key, ids in sent.items() if key in pending}
        self._rewrite()
        return list(pending.values())

    def pending_item(self, agent_id: str, item_id: str) -> InboxItem | None:
        """The accepted item if it is not processed yet."""
        return self._pending.get((agent_id, item_id))

    def already_sent(self, key: tuple[str, str], outgoing_id: str) -> bool:
        """Whether the outgoing message was delivered; ``key`` is (agent id, item id)."""
        return outgoing_id in self._sent.get(key, ())

    def accept(self, item: InboxItem) -> asyncio.Future[None]:
        """Queue the item's record; the future resolves once it is durable."""
        self._pending[item.key] = item
        self._count()
        item.durable = self.writer.append(self.path, encode_record(item.to_record()))
        item.turn.bind(item.durable)
        return item.durable

    def forget(self, item: InboxItem) -> None:
        """The item's append failed: it was never accepted."""
        self._pending.pop(item.key, None)

    def mark_sent(self, key: tuple[str, str], outgoing_id: str) -> None:
        self._sent.setdefault(key, set()).add(outgoing_id)
        agent_id, item_id = key
        record = {"op": "sent", "agentId": agent_id, "id": item_id, "outgoingId": outgoing_id}
        self.writer.append_nowait(self.path, encode_record(record))
        self._count()

    def mark_done(self, item: InboxItem) -> None:
        self._pending.pop(item.key, None)
        self._sent.pop(item.key, None)
        record = {"op": "done", "agentId": item.agent_id, "id": item.id}
        self.writer.append_nowait(self.path, encode_record(record))
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
        chunks = []
        for key, item in list(self._pending.items()):
            chunks.append(encode_record(item.to_record()))
            for outgoing_id in sorted(self._sent.get(key, ())):
                record = {"op": "sent", "agentId": key[0], "id": key[1], "outgoingId": outgoing_id}
                chunks.append(encode_record(record))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, b"".join(chunks))

    def size_bytes(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
