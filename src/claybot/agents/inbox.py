"""Inbox items: what an agent must process (a message, a reset, a revocation).

Every item is made durable (``InboxStore.accept``) before it is acknowledged, and
stays pending until it is done. Its records are the inbox log's (``inbox_log.py``)
format, which every ``InboxStore`` keeps: the item (``op``: its kind), ``sent`` (an
outgoing message of it was delivered) and ``done`` (it was processed).
``unfinished`` reads such records back as a boot needs them; the agent's history then
decides what of a turn already happened, so nothing is processed twice.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from claybot.agents.turn import Turn

ItemKind = Literal["message", "reset", "revoke"]
ITEM_KINDS = frozenset({"message", "reset", "revoke"})
ItemKey = tuple[str, str]  # (agent id, item id)


# The inbox log's lines, in the order their keys are written (their bytes are the format).
class ItemRecord(TypedDict):
    op: ItemKind
    agentId: str
    id: str
    at: int
    text: NotRequired[str]
    context: NotRequired[dict[str, Any]]


class SentRecord(TypedDict):
    op: Literal["sent"]
    agentId: str
    id: str
    outgoingId: str


class DoneRecord(TypedDict):
    op: Literal["done"]
    agentId: str
    id: str


InboxRecord = ItemRecord | SentRecord | DoneRecord


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

    def to_record(self) -> ItemRecord:
        record: ItemRecord = {
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
    def from_record(record: Mapping[str, Any]) -> InboxItem:
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


def sent_record(key: ItemKey, outgoing_id: str) -> SentRecord:
    return {"op": "sent", "agentId": key[0], "id": key[1], "outgoingId": outgoing_id}


def done_record(item: InboxItem) -> DoneRecord:
    return {"op": "done", "agentId": item.agent_id, "id": item.id}


def unfinished(
    records: Iterable[Mapping[str, Any]],
) -> tuple[dict[ItemKey, InboxItem], dict[ItemKey, set[str]]]:
    """The items not done, in acceptance order, and the outgoing ids each had delivered;
    an item written twice (a checkpoint races an append) counts once."""
    pending: dict[ItemKey, InboxItem] = {}
    sent: dict[ItemKey, set[str]] = {}
    finished: set[ItemKey] = set()
    for record in records:
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
    return pending, {key: ids for key, ids in sent.items() if key in pending}


def pending_records(
    pending: dict[ItemKey, InboxItem], sent: dict[ItemKey, set[str]]
) -> Iterator[InboxRecord]:
    """What a compacted log holds: each unfinished item and its delivery marks."""
    for key, item in list(pending.items()):
        yield item.to_record()
        for outgoing_id in sorted(sent.get(key, ())):
            yield sent_record(key, outgoing_id)
