"""What every ``InboxStore`` keeps in memory, whatever its medium.

The items not yet done, the outgoing ids each has had delivered, and how many
records were appended since the last checkpoint: the same bookkeeping on files,
in memory and on PostgreSQL. A store subclasses ``InboxLedger`` and says only how
one record reaches its medium (``_write`` when the caller waits for it to be
durable, ``_write_nowait`` when it does not) and how it checkpoints.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from claybot.agents.inbox import (
    InboxItem,
    InboxRecord,
    ItemKey,
    done_record,
    pending_records,
    sent_record,
    unfinished,
)


class InboxLedger(ABC):
    def __init__(self) -> None:
        self._pending: dict[ItemKey, InboxItem] = {}
        self._sent: dict[ItemKey, set[str]] = {}
        self._appended = 0

    @abstractmethod
    def _write(self, record: InboxRecord) -> asyncio.Future[None]:
        """Append ``record``; the future resolves once it is durable."""

    @abstractmethod
    def _write_nowait(self, record: InboxRecord) -> None:
        """Append ``record`` in the next batch; nobody waits for it."""

    def _appended_one(self) -> None:
        self._appended += 1

    def _restore(self, records: Iterable[Mapping[str, Any]]) -> list[InboxItem]:
        """Take the records read back at boot; answer the items still to process."""
        self._pending, self._sent = unfinished(records)
        return list(self._pending.values())

    def _kept_records(self) -> Iterator[InboxRecord]:
        """What a checkpoint keeps: each unfinished item and its delivery marks."""
        return pending_records(self._pending, self._sent)

    def accept(self, item: InboxItem) -> asyncio.Future[None]:
        self._pending[item.key] = item
        self._appended_one()
        return self._write(item.to_record())

    def forget(self, item: InboxItem) -> None:
        self._pending.pop(item.key, None)

    def pending_item(self, agent_id: str, item_id: str) -> InboxItem | None:
        return self._pending.get((agent_id, item_id))

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def mark_done(self, item: InboxItem) -> None:
        self._pending.pop(item.key, None)
        self._sent.pop(item.key, None)
        self._appended_one()
        self._write_nowait(done_record(item))

    def already_sent(self, key: ItemKey, outgoing_id: str) -> bool:
        return outgoing_id in self._sent.get(key, ())

    def mark_sent(self, key: ItemKey, outgoing_id: str) -> None:
        self._sent.setdefault(key, set()).add(outgoing_id)
        self._appended_one()
        self._write_nowait(sent_record(key, outgoing_id))

    @property
    def appended_since_checkpoint(self) -> int:
        return self._appended
