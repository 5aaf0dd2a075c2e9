"""The one admission path: how an agent comes to be, and how an item gets into its inbox.

Every message and reset goes through ``Admissions.accept``: wake each target agent,
drop an item id it has seen before (the poster gets a handle on that earlier
item instead), queue every item in memory and in the inbox log, then wait for the
one sync that makes them all durable. A failed append un-accepts the items it
carried and raises, so nothing is acknowledged that is not on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

from claybot.agents.agent import Agent, AgentRuntime, outgoing_message
from claybot.agents.descriptors import (
    AgentDescriptor,
    UserDescriptor,
    descriptor_key,
    descriptor_to_dict,
)
from claybot.agents.directory import AgentDirectory, AgentNotFound
from claybot.agents.durable_port import IndexEntry
from claybot.agents.history import HistoryTail, start_record, turn_progress
from claybot.agents.inbox import InboxItem, ItemKind
from claybot.agents.residency import Residency
from claybot.agents.state import AgentState
from claybot.agents.turn import Turn, TurnOutcome
from claybot.agents.turn_loop import outcome_of
from claybot.connectors.base import OutgoingMessage
from claybot.kernel.errors import Unavailable
from claybot.kernel.event_types import EventType
from claybot.kernel.ids import IdFactory
from claybot.permissions.model import Permissions

# (agent id, kind, item id or None for a new one, text, context)
Admission = tuple[str, ItemKind, str | None, str, dict[str, Any]]


class EngineStopping(Unavailable, RuntimeError):
    """The engine is shutting down and accepts nothing more; a restarted one will."""

    code = "stopping"
    retry_after_s = 1


class Admissions:
    def __init__(
        self,
        *,
        directory: AgentDirectory,
        residency: Residency,
        runtime: AgentRuntime,
        new_id: IdFactory,
        monotonic: Callable[[], float],
        schedule: Callable[[Agent], None],
        stopping: Callable[[], bool],
    ) -> None:
        self.directory = directory
        self._residency = residency
        self._runtime = runtime
        self._store = runtime.store
        self._inbox = runtime.inbox_log
        self._now_ms = runtime.now_ms
        self._new_id = new_id
        self._monotonic = monotonic
        self._schedule = schedule  # the agent has work: run it
        self._stopping = stopping
        self._creating: dict[str, asyncio.Future[str]] = {}

    # -- new agents ---------------------------------------------------------------------

    async def resolve(
        self, descriptor: AgentDescriptor, *, permissions: Permissions | None = None
    ) -> str:
        """The agent id for a descriptor, creating the agent on first use.

        ``permissions`` are what a newly created agent starts with (default: the
        runtime's defaults); an existing agent keeps its own.
        """
        agent_id = self.directory.id_for(descriptor)
        if agent_id is not None:
            return agent_id
        key = descriptor_key(descriptor)
        pending = self._creating.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._creating[key] = future
        try:
            agent_id = await self.create(descriptor, permissions=permissions)
            future.set_result(agent_id)
            return agent_id
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._creating[key]

    async def create(
        self,
        descriptor: AgentDescriptor,
        *,
        agent_id: str | None = None,
        permissions: Permissions | None = None,
        first_message: tuple[str, str] | None = None,
    ) -> str:
        """Create an agent; with ``first_message`` (text, origin) it starts with that item.

        The first item is made durable *before* the agent's files: a crash in between
        leaves an item whose agent is missing, which boot drops, rather than an agent
        that exists but never got its task.
        """
        if self._stopping():
            raise EngineStopping("the engine is shutting down")
        agent_id = agent_id or self._new_id()
        now = self._runtime.now_ms()
        state = AgentState(
            createdAt=now,
            updatedAt=now,
            permissions=permissions or self._runtime.default_permissions,
        )
        first: InboxItem | None = None
        if first_message is not None:
            text, origin = first_message
            first = InboxItem(
                kind="message",
                id=self._new_id(),
                agent_id=agent_id,
                at=now,
                text=text,
                context={"origin": origin},
            )
            await self._make_durable(first)
        entry = IndexEntry(agent_id, descriptor, now)
        try:
            await self._store.create(
                entry, state, start_record(now, descriptor_to_dict(descriptor))
            )
        except BaseException:
            if first is not None:
                self._inbox.mark_done(first)  # its agent never came to be
            raise
        self.directory.add(entry)
        self.directory.rested(agent_id, now)
        self.directory.touch(agent_id)
        history = HistoryTail([start_record(now)], message_ids=[])
        agent = Agent(agent_id, descriptor, state, history, self._runtime)
        agent.last_active = self._monotonic()
        self._residency.adopt(agent)
        self._runtime.events.emit(
            EventType.AGENT_CREATED,
            {"agentId": agent_id, "descriptor": descriptor_to_dict(descriptor), "source": "agent"},
        )
        if first is not None:
            self._runtime.meter.messages_accepted(1)
            agent.remember(first.id)
            agent.inbox.push(first)
            self._schedule(agent)
        return agent_id

    # -- items ---------------------------------------------------------------------------

    def turn(self, agent_id: str, item_id: str) -> Turn:
        """The handle of an item accepted earlier (also before a restart).

        An unfinished item's handle follows it live; a finished one's answers from
        history. An item history does not know ends with an empty outcome.
        """
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        pending = self._inbox.pending_item(agent_id, item_id)
        if pending is not None:
            return pending.turn.follower()
        return Turn(
            agent_id, item_id, duplicate=True, history=partial(self._ended_turn, agent_id, item_id)
        )

    async def _ended_turn(
        self, agent_id: str, item_id: str
    ) -> tuple[list[OutgoingMessage], TurnOutcome]:
        records = await self._store.read_written_turn(agent_id, item_id)
        progress = turn_progress(records, item_id)
        descriptor = self.directory.entry(agent_id).descriptor
        replies = [
            outgoing_message(
                descriptor, agent_id, item_id, sent.id, sent.text, sent.final, files=sent.files
            )
            for sent in progress.outgoing
        ]
        return replies, outcome_of(progress)

    async def accept(self, posts: list[Admission]) -> list[Turn]:
        """The one admission path: wake each agent, queue every item, wait for the sync."""
        if self._stopping():
            raise EngineStopping("the engine is shutting down")
        agents: dict[str, Agent] = {}
        for agent_id in {post[0] for post in posts}:
            while True:
                agent = await self._residency.wake(agent_id)
                if not agent.unloaded:
                    break
            agents[agent_id] = agent
        turns: list[Turn] = []
        queued: list[InboxItem] = []
        for agent_id, kind, item_id, text, context in posts:
            agent = agents[agent_id]
            item = self._enqueue(agent, kind, item_id, text, context)
            if item is None:
                turns.append(self.turn(agent_id, item_id or ""))
            else:
                queued.append(item)
                turns.append(item.turn)
        for item in queued:
            # Shielded: a poster that goes away does not cancel the write. Awaiting the
            # futures themselves (no task, no asyncio.wait) is the cheapest wait, and one
            # sync completes them all, so after the first the rest are already done.
            assert item.durable is not None
            with contextlib.suppress(Exception):  # looked at below, for every item
                await asyncio.shield(item.durable)
        failure: BaseException | None = None
        messages = 0
        for item in queued:
            assert item.durable is not None
            error = item.durable.exception()
            if error is not None:
                agents[item.agent_id].forget(item.id)
                self._inbox.forget(item)
                failure = failure or error
            elif item.kind == "message":
                messages += 1
        if messages:
            self._runtime.meter.messages_accepted(messages)
        if failure is not None:
            raise failure
        return turns

    def _enqueue(
        self,
        agent: Agent,
        kind: ItemKind,
        item_id: str | None,
        text: str,
        context: dict[str, Any],
    ) -> InboxItem | None:
        """Queue an item for a loaded agent; None if its id was seen before."""
        item_id = item_id or self._new_id()
        if not agent.remember(item_id):
            return None  # seen before
        item = InboxItem(
            kind=kind,
            id=item_id,
            agent_id=agent.id,
            at=self._now_ms(),
            text=text,
            context=context,
        )
        # Queue in memory now so the inbox order is the log order; the runner
        # waits for durability before it processes the item.
        self._make_durable(item)
        agent.inbox.push(item)
        if isinstance(agent.descriptor, UserDescriptor):
            self.directory.touch(agent.id)
        self._schedule(agent)
        return item

    def _make_durable(self, item: InboxItem) -> asyncio.Future[None]:
        """Write the item to the inbox store; its handle and its runner wait for that."""
        durable = item.durable = self._inbox.accept(item)
        item.turn.bind(durable)
        return durable
