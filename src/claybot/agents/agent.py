"""One agent: processes its inbox one item at a time.

A reset appends a marker that starts the context afresh. A message runs the turn
loop (``claybot.agents.turn_loop``) over the agent's transcript (history.jsonl),
in a task of its own so ``/stop`` can cancel it without stopping the engine; the
agent applies a decided permission grant first, and turns each reply into an
outgoing message for its conversation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from claybot.agents.descriptors import AgentDescriptor, UserDescriptor, agent_kind
from claybot.agents.durable_port import AgentStore, InboxStore
from claybot.agents.history import (
    HistoryTail,
    TurnProgress,
    build_context,
    reset_record,
    since_last_marker,
)
from claybot.agents.inbox import AgentInbox, InboxItem
from claybot.agents.ports import UNMETERED, Outbox, TurnMeter
from claybot.agents.recent_ids import RecentIds
from claybot.agents.state import AgentState, ProviderSelection
from claybot.agents.transcript import AgentTranscript
from claybot.agents.turn import TurnOutcome
from claybot.agents.turn_loop import TurnLoop, TurnWork
from claybot.connectors.base import OutgoingMessage
from claybot.durable.disk_errors import heals_by_waiting
from claybot.files.placement import PlacedFile, place_files
from claybot.files.reference import FileReference
from claybot.files.store import FileStore
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.permissions.model import Permissions
from claybot.permissions.tags import (
    PermissionTagError,
    apply_grant,
    parse_tag,
    remove_grant,
    revoked_tag,
)
from claybot.providers.base import TokenUsage

log = logging.getLogger(__name__)

SEEN_IDS_LIMIT = 4096  # idempotent-retry window per agent
STOPPED_TEXT = "Stopped."
UNEXPECTED_ERROR = "Unexpected error while processing this message; it was not completed."
UNWRITABLE = "This message could not be processed ({reason}); it was not completed."


class DeliveryHeld(Exception):
    """The turn ended while the engine was stopping, with replies that could not go out:
    its item stays pending, and the next start delivers them (the transcript holds them
    unmarked) without running the turn again."""


@dataclass
class AgentRuntime:
    """What every agent shares; built once by the engine."""

    store: AgentStore
    inbox_log: InboxStore
    events: EventBus
    outbox: Outbox
    loop: TurnLoop
    now_ms: Callable[[], int]
    default_permissions: Permissions = field(default_factory=Permissions)
    meter: TurnMeter = UNMETERED  # the engine's metrics
    files: FileStore | None = None  # where the files messages carry are kept
    # Where each agent gets its own copies of them: ``<received>/<agent id>``, which
    # that agent alone may read (resolved, as grants are).
    received: Path | None = None


def conversation_routing(descriptor: AgentDescriptor, item: InboxItem) -> dict[str, str] | None:
    """``state.json``'s ``routing`` (seed 001): where the agent's latest conversation
    came in, and so where its replies go; None for an item that came from no
    connector (a system message, a scheduled run), which leaves it as it was."""
    connector = item.context.get("connector")
    if not isinstance(descriptor, UserDescriptor) or not isinstance(connector, str):
        return None
    return {
        "connector": connector,
        "channelId": descriptor.channelId,
        "userId": descriptor.userId,
        "messageId": item.id,
    }


class Agent:
    def __init__(
        self,
        agent_id: str,
        descriptor: AgentDescriptor,
        state: AgentState,
        history: HistoryTail,
        runtime: AgentRuntime,
    ) -> None:
        self.id = agent_id
        self.descriptor = descriptor
        self.kind = agent_kind(descriptor)
        self.state = state
        self.runtime = runtime
        self.context = build_context(since_last_marker(history.records))
        self.inbox = AgentInbox()
        self.running = False
        self.unloaded = False
        self.state_dirty = False
        self.last_active = 0.0
        self._seen = RecentIds(SEEN_IDS_LIMIT)
        # Resets too: a connector's /reset delivered again must not reset twice.
        self._seen.fill(history.message_ids)
        self.transcript = AgentTranscript(runtime.store, runtime.inbox_log, agent_id)
        self._resume: dict[str, TurnProgress] = {}
        self._item: InboxItem | None = None  # the item whose turn runs (or ran last)
        self._current: asyncio.Task[TurnOutcome] | None = None
        self._stop_requested = False
        self._held_replies = False  # a reply of the running turn was held (see DeliveryHeld)
        received = runtime.received
        # Its conversation's files: read through a grant inside the private folder.
        self._own_files = str(received / agent_id) if received is not None else None

    # -- message ids ---------------------------------------------------------

    def remember(self, message_id: str) -> bool:
        """Note an item id; False if it was seen before (a retried post)."""
        return self._seen.add(message_id)

    def forget(self, message_id: str) -> None:
        self._seen.discard(message_id)

    def resume_from(self, item_id: str, progress: TurnProgress) -> None:
        """History shows this item's turn already started before a crash."""
        self._resume[item_id] = progress

    # -- processing ----------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.running or bool(len(self.inbox))

    def abort(self) -> bool:
        """Stop the running turn (``/stop``); False if no turn is running."""
        task = self._current
        if task is None or task.done():
            return False
        self._stop_requested = True
        task.cancel()
        return True

    async def process(self, item: InboxItem) -> TurnOutcome:
        """Run one item: a reset, or a message's whole turn (resumed if it had started)."""
        if item.kind == "reset":
            await self._reset(item)
            outcome = TurnOutcome("")
        elif item.kind == "revoke":
            await self._revoke(item)
            outcome = TurnOutcome("")
        else:
            routing = conversation_routing(self.descriptor, item)
            if routing is not None:
                self.state.routing = routing
            self._held_replies = False
            outcome = await self._guarded_turn(item)
        self.state.updatedAt = self.runtime.now_ms()
        self.state_dirty = True
        if self._held_replies:
            raise DeliveryHeld(item.id)
        return outcome

    async def _guarded_turn(self, item: InboxItem) -> TurnOutcome:
        """Run the turn in its own task so ``/stop`` can cancel it without stopping the engine."""
        origin = item.context.get("origin")
        work = TurnWork(
            item.id,
            item.text,
            origin if isinstance(origin, str) else None,
            self.transcript,
            self.context,
            self._resume.pop(item.id, None),
            await self._files_of(item),
        )
        loop = self.runtime.loop
        self._stop_requested = False
        self._item = item
        task = asyncio.ensure_future(self._turn(item, work))
        self._current = task
        try:
            return await task
        except asyncio.CancelledError:
            if not self._stop_requested:
                raise  # the engine is shutting down: the item stays pending
            closed = await loop.close(self, work, STOPPED_TEXT, failed=False)
            return replace(closed, stopped=True)
        except OSError as exc:
            if heals_by_waiting(exc):
                # The disk refused a write (full, failing): nothing more can be recorded
                # now. The item stays pending; the agent system resumes it later.
                raise
            # Refused the same way however often it is tried: the turn ends with the
            # reason and the conversation goes on (``_process`` suspends the agent only
            # if even this cannot be written).
            log.error(
                "turn failed: %s",
                exc,
                extra={"action": "agent.turn_unwritable", "agentId": self.id, "itemId": item.id},
            )
            reason = exc.strerror or type(exc).__name__
            return await loop.close(self, work, UNWRITABLE.format(reason=reason), failed=True)
        except Exception:
            # A bug must not leave the user (or a parent agent) waiting forever.
            log.exception(
                "turn failed",
                extra={"action": "agent.turn_failed", "agentId": self.id, "itemId": item.id},
            )
            return await loop.close(self, work, UNEXPECTED_ERROR, failed=True)
        finally:
            self._current = None
            self._stop_requested = False

    async def _files_of(self, item: InboxItem) -> tuple[PlacedFile, ...]:
        """The item's files, each copied where this agent alone may read it."""
        listed = item.context.get("files")
        store = self.runtime.files
        if not listed or store is None or self._own_files is None:
            return ()
        folder = Path(self._own_files)
        return tuple(await asyncio.to_thread(place_files, store, listed, folder))

    async def _turn(self, item: InboxItem, work: TurnWork) -> TurnOutcome:
        await self._apply_grant(item)  # idempotent: also on a resumed turn
        return await self.runtime.loop.run(self, work)

    async def _reset(self, item: InboxItem) -> None:
        message = item.context.get("message")
        record = reset_record(
            self.runtime.now_ms(), item.id, message if isinstance(message, str) else None
        )
        await self.runtime.store.append_history(self.id, record)
        self.context = build_context([record])
        self.runtime.events.emit(
            EventType.AGENT_RESET, {"agentId": self.id, "context": item.context}
        )

    async def _revoke(self, item: InboxItem) -> None:
        """Take a grant back, in the inbox's order: a turn queued before the revocation
        still has the grant, and every turn after it does not."""
        try:
            tag = revoked_tag(str(item.context.get("permission", "")))
        except PermissionTagError:
            log.error("ignoring a malformed revocation", extra={"agentId": self.id})
            return
        before = self.state.permissions
        after = remove_grant(before, tag)
        if after != before:
            self.state.permissions = after
            self.state.updatedAt = self.runtime.now_ms()
            self.state_dirty = False
            await self.runtime.store.write_state(self.id, self.state)
        self.runtime.events.emit(
            EventType.AGENT_GRANT_REVOKED,
            {"agentId": self.id, "permission": str(tag), "held": after != before},
        )

    async def _apply_grant(self, item: InboxItem) -> None:
        """A decided permission request: apply it and persist state before the turn runs."""
        grant = item.context.get("grant")
        if not isinstance(grant, dict) or not grant.get("approved"):
            return
        try:
            tag = parse_tag(str(grant.get("permission", "")))
        except PermissionTagError:
            log.error("ignoring a malformed grant", extra={"agentId": self.id, "itemId": item.id})
            return
        self.state.permissions = apply_grant(self.state.permissions, tag)
        self.state.updatedAt = self.runtime.now_ms()
        self.state_dirty = False
        await self.runtime.store.write_state(self.id, self.state)

    # -- what the turn loop asks of its owner (``TurnOwner``) ----------------------------

    @property
    def permissions(self) -> Permissions:
        """Its grants, and the read grant of its own received files (never stored: it is
        the agent's by being the agent, and no revocation can take it)."""
        granted = self.state.permissions
        own = self._own_files
        if own is None or own in granted.readDirs:
            return granted
        return granted.model_copy(update={"readDirs": [*granted.readDirs, own]})

    async def reply(
        self,
        item_id: str,
        outgoing_id: str,
        text: str,
        *,
        final: bool,
        delivered_before: bool,
        files: tuple[FileReference, ...] = (),
    ) -> bool:
        """A reply of the running turn: to its handle always, out only if not sent before,
        and only while the engine is not stopping (else held: False)."""
        message = outgoing_message(
            self.descriptor, self.id, item_id, outgoing_id, text, final, files=files
        )
        item = self._item
        if item is not None and item.id == item_id:
            item.turn.replied(message)
        if delivered_before:
            return True
        rt = self.runtime
        if rt.outbox.holding:
            # Neither the event streams nor the connectors would carry it now.
            self._held_replies = True
            return False
        rt.events.emit(EventType.AGENT_OUTGOING, {"agentId": self.id, "message": message.to_dict()})
        await rt.outbox.deliver(message)
        return True

    def count_usage(self, usage: TokenUsage, provider: str, model: str) -> None:
        # Added in place (the totals are this agent's own): every turn passes here, and a
        # new validated model each time cost more than the rest of the bookkeeping.
        totals = self.state.tokens
        totals.input += usage.input
        totals.output += usage.output
        totals.cacheRead += usage.cache_read
        totals.cacheWrite += usage.cache_write
        totals.total += usage.total
        selected = self.state.provider
        if provider and (
            selected is None or selected.providerId != provider or selected.model != (model or None)
        ):
            self.state.provider = ProviderSelection(providerId=provider, model=model or None)


def outgoing_message(
    descriptor: AgentDescriptor,
    agent_id: str,
    item_id: str,
    outgoing_id: str,
    text: str,
    final: bool,
    *,
    files: tuple[FileReference, ...] = (),
) -> OutgoingMessage:
    """A reply of the turn of ``item_id``: to the conversation a user agent belongs to;
    a background agent's has no connector (its clients follow the events). ``files``:
    what ``send_file`` sent, ``text`` their caption."""
    if isinstance(descriptor, UserDescriptor):
        return OutgoingMessage(
            id=outgoing_id,
            agent_id=agent_id,
            connector=descriptor.connector,
            user_id=descriptor.userId,
            channel_id=descriptor.channelId,
            text=text,
            in_reply_to=item_id,
            final=final,
            files=files,
        )
    return OutgoingMessage(outgoing_id, agent_id, "", "", "", text, item_id, final, files)
