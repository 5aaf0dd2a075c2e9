"""AgentSystem: the agent runtime's front door.

It resolves targets to agents, admits items to their inboxes through one path
(``submit``, ``submit_many``, ``reset``: each returns a ``Turn``), and runs them:
each agent processes at most one item at a time, at most ``max_concurrent``
agents at once. Behind it: the directory of every agent (``directory.py``), the
agents in memory (``residency.py``), the turn loop (``turn_loop.py``) and the
subagent rules (``subagents.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from claybot.agents.agent import UNEXPECTED_ERROR, Agent, AgentRuntime, outgoing_message
from claybot.agents.descriptors import (
    AgentDescriptor,
    FetchStrategy,
    SubagentDescriptor,
    UserDescriptor,
    descriptor_key,
    descriptor_to_dict,
)
from claybot.agents.directory import AgentDirectory, AgentNotFound
from claybot.agents.history import start_record, turn_progress
from claybot.agents.inbox import InboxItem, ItemKind
from claybot.agents.residency import Residency, StorageFull
from claybot.agents.state import AgentState
from claybot.agents.store import AgentStoreError, IndexEntry
from claybot.agents.subagents import SubagentLimit, SubagentLimits, result_notice
from claybot.agents.turn import Turn, TurnOutcome
from claybot.agents.turn_loop import outcome_of
from claybot.connectors.base import InboundMessage, OutgoingMessage
from claybot.kernel.ids import IdFactory, new_id
from claybot.permissions.model import Permissions

__all__ = [
    "AgentNotFound",
    "AgentSystem",
    "EngineStopping",
    "HistoryPage",
    "MessageTooLarge",
    "StorageFull",
    "SubagentLimit",
    "SubagentLimits",
    "Submission",
]

log = logging.getLogger(__name__)

RUN_BATCH = 32  # items an agent processes before letting other agents run
CHECKPOINT_INTERVAL_S = 60.0  # bounds how much journal a boot replays


class MessageTooLarge(ValueError):
    pass


class EngineStopping(RuntimeError):
    pass


# (agent id, kind, item id or None for a new one, text, context)
Admission = tuple[str, ItemKind, str | None, str, dict[str, Any]]


@dataclass(frozen=True)
class Submission:
    """One message of ``submit_many``: to an agent id, like ``submit``."""

    agent_id: str
    text: str
    message_id: str | None = None
    origin: str | None = None
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryPage:
    records: list[dict[str, Any]]
    total: int


class AgentSystem:
    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        max_concurrent: int,
        idle_unload_s: float,
        max_message_bytes: int,
        id_factory: IdFactory = new_id,
        monotonic: Callable[[], float] = time.monotonic,
        subagent_limits: SubagentLimits | None = None,
    ) -> None:
        self.runtime = runtime
        self.subagent_limits = subagent_limits or SubagentLimits()
        self.store = runtime.store
        self.inbox_log = runtime.inbox_log
        self.events = runtime.events
        self.directory = AgentDirectory(runtime.store)
        self.residency = Residency(
            runtime,
            self.directory,
            idle_unload_s=idle_unload_s,
            resumed=self._schedule,
            monotonic=monotonic,
        )
        self._max_message_bytes = max_message_bytes
        self._new_id = id_factory
        self._monotonic = monotonic
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._creating: dict[str, asyncio.Future[str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------

    async def boot(self) -> int:
        """Load the index and the inbox log; wake agents with unfinished items."""
        await asyncio.to_thread(self.inbox_log.replay, self.store.root.parent)
        entries = await asyncio.to_thread(self.store.load_index)
        for entry in entries:
            self.directory.add(entry)
        recovered = await asyncio.to_thread(self.inbox_log.recover)
        waiting = self.residency.recovered
        for item in recovered:
            if item.agent_id in self.directory:
                waiting.setdefault(item.agent_id, []).append(item)
            else:
                # Its agent folder is gone (removed by hand): nobody can process it.
                log.error(
                    "dropping an inbox item of a missing agent",
                    extra={"action": "inbox.orphan", "agentId": item.agent_id, "itemId": item.id},
                )
                self.inbox_log.mark_done(item)
        for agent_id in list(waiting):
            agent = await self.residency.wake(agent_id)
            self._schedule(agent)
        self._background = [
            asyncio.create_task(self.residency.sweep_idle(), name="agents-idle-sweeper"),
            asyncio.create_task(
                self.residency.flush_states_periodically(), name="agents-state-flush"
            ),
            asyncio.create_task(self._checkpoint_periodically(), name="agents-checkpoint"),
        ]
        return len(recovered)

    async def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Stop taking items; let running turns finish, leaving the rest durably pending."""
        self._stopping = True
        self.residency.stopping = True
        for task in self._background:
            task.cancel()
        self.residency.cancel_resumes()
        running = [task for task in self._tasks if not task.done()]
        if running:
            _, stragglers = await asyncio.wait(running, timeout=drain_timeout_s)
            for task in stragglers:
                task.cancel()
            if stragglers:
                await asyncio.wait(stragglers)
        await self.residency.flush_states()
        try:
            await self.inbox_log.checkpoint()
        except OSError as exc:
            # The journal stays as it is and is replayed at the next start.
            log.error(
                "no checkpoint at shutdown: %s", exc, extra={"action": "agents.checkpoint_failed"}
            )

    async def _checkpoint_periodically(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            if self.inbox_log.appended_since_checkpoint:
                try:
                    await self.inbox_log.checkpoint()
                except OSError as exc:  # a full disk: the next interval tries again
                    log.error(
                        "checkpoint failed: %s", exc, extra={"action": "agents.checkpoint_failed"}
                    )

    # -- the directory ----------------------------------------------------------

    def exists(self, agent_id: str) -> bool:
        return agent_id in self.directory

    def descriptor_of(self, agent_id: str) -> AgentDescriptor:
        return self.directory.entry(agent_id).descriptor

    @property
    def agent_count(self) -> int:
        return len(self.directory)

    @property
    def loaded_count(self) -> int:
        return len(self.residency.loaded)

    def agent_id_for(self, descriptor: AgentDescriptor) -> str | None:
        """The agent id a descriptor maps to, without creating one."""
        return self.directory.id_for(descriptor)

    def agent_for(self, strategy: FetchStrategy) -> str | None:
        """Seed 003: the most recent user agent, or the most recent heartbeat agent."""
        return self.directory.most_recent(strategy, self.residency.live_updated_at)

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
            agent_id = await self._create(descriptor, permissions=permissions)
            future.set_result(agent_id)
            return agent_id
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._creating[key]

    async def _create(
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
        if self._stopping:
            raise EngineStopping("the engine is shutting down")
        agent_id = agent_id or self._new_id()
        now = self.runtime.now_ms()
        state = AgentState(
            createdAt=now,
            updatedAt=now,
            permissions=permissions or self.runtime.default_permissions,
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
            await self.inbox_log.accept(first)
        entry = IndexEntry(agent_id, descriptor, now)
        try:
            await self.store.create(entry, state, start_record(now, descriptor_to_dict(descriptor)))
        except BaseException:
            if first is not None:
                self.inbox_log.mark_done(first)  # its agent never came to be
            raise
        self.directory.add(entry)
        self.directory.rested(agent_id, now)
        self.directory.touch(agent_id)
        agent = Agent(agent_id, descriptor, state, [start_record(now)], self.runtime)
        agent.last_active = self._monotonic()
        self.residency.adopt(agent)
        self.events.emit(
            "agent.created",
            {"agentId": agent_id, "descriptor": descriptor_to_dict(descriptor), "source": "agent"},
        )
        if first is not None:
            agent.remember(first.id)
            agent.inbox.push(first)
            self._schedule(agent)
        return agent_id

    def problems(self) -> list[dict[str, str]]:
        """Damaged agent files: those that could not be routed at boot, and those found
        while loading (a state.json that did not validate)."""
        found = [*self.store.unroutable, *self.residency.problems.values()]
        return [problem.to_dict() for problem in found]

    # -- posting --------------------------------------------------------------

    async def submit(
        self,
        target: str | AgentDescriptor,
        text: str,
        *,
        message_id: str | None = None,
        origin: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> Turn:
        """Accept a message for an agent: durable in its inbox when this returns.

        ``target`` is an agent id, or a descriptor (a connector's conversation) that
        is resolved to one, creating the agent on first use; only such inbound text
        is held to the size limit. ``origin`` marks a system notice (cron, a
        subagent's result) rather than something a person typed. A ``message_id``
        seen before returns a handle on that earlier message (``duplicate``).
        """
        if isinstance(target, str):
            agent_id = target
            if agent_id not in self.directory:
                raise AgentNotFound(agent_id)
        else:
            size = len(text.encode())
            if size > self._max_message_bytes:
                raise MessageTooLarge(
                    f"text is {size} bytes; the limit is {self._max_message_bytes}"
                )
            agent_id = await self.resolve(target)
        item_context = dict(context or {})
        if origin:
            item_context["origin"] = origin
        return await self._accept(agent_id, "message", message_id, text, item_context)

    async def submit_inbound(self, message: InboundMessage) -> Turn:
        """A connector's message, to the agent of its conversation."""
        descriptor = UserDescriptor(
            connector=message.connector, userId=message.user_id, channelId=message.channel_id
        )
        context: dict[str, Any] = {"connector": message.connector}
        if message.metadata:
            context["metadata"] = message.metadata
        return await self.submit(
            descriptor, message.text, message_id=message.message_id, context=context
        )

    # -- subagents ----------------------------------------------------------------

    def depth_of(self, agent_id: str) -> int:
        """0 for user, cron and heartbeat agents; a subagent is one deeper than its parent."""
        return self.directory.depth_of(agent_id)

    def busy_children(self, parent_id: str) -> int:
        count = 0
        for agent_id in self.directory.children_of(parent_id):
            agent = self.residency.loaded.get(agent_id)
            if (agent is not None and agent.busy) or agent_id in self.residency.recovered:
                count += 1
        return count

    async def permissions_of(self, agent_id: str) -> Permissions:
        agent = self.residency.loaded.get(agent_id)
        if agent is not None:
            return agent.state.permissions
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        try:
            state = await asyncio.to_thread(self.store.read_state, agent_id)
        except AgentStoreError:
            state = None  # unreadable grants grant nothing
        return state.permissions if state is not None else Permissions()

    async def start_subagent(
        self,
        parent_id: str,
        name: str,
        prompt: str,
        *,
        permissions: Permissions | None = None,
    ) -> str:
        """Create a new background agent (a new id every time) and post its first message."""
        if parent_id not in self.directory:
            raise AgentNotFound(parent_id)
        self.subagent_limits.check(self.depth_of(parent_id) + 1, self.busy_children(parent_id))
        agent_id = self._new_id()
        descriptor = SubagentDescriptor(id=agent_id, parentAgentId=parent_id, name=name)
        await self._create(
            descriptor,
            agent_id=agent_id,
            permissions=permissions,
            first_message=(prompt, parent_id),
        )
        return agent_id

    async def _report_to_parent(self, agent: Agent, item: InboxItem, outcome: TurnOutcome) -> None:
        """A subagent's turn ended: its parent gets the result, or one failure notice.

        Durable before the item is marked done, and its message id is derived from
        the subagent's item, so a restart that resumes this turn posts it again and
        the parent's inbox drops the repeat.
        """
        descriptor = agent.descriptor
        assert isinstance(descriptor, SubagentDescriptor)
        parent_id = descriptor.parentAgentId
        if parent_id not in self.directory:
            log.warning(
                "a subagent's parent is gone; its result is dropped",
                extra={"action": "subagent.orphan", "agentId": agent.id, "parentId": parent_id},
            )
            return
        text = result_notice(descriptor.name, agent.id, outcome)
        await self.submit(
            parent_id, text, message_id=f"{agent.id}:{item.id}:result", origin=agent.id
        )
        self.events.emit(
            "agent.subagent.failed" if outcome.failed else "agent.subagent.finished",
            {"agentId": agent.id, "parentAgentId": parent_id, "messageId": item.id},
        )

    def turn(self, agent_id: str, item_id: str) -> Turn:
        """The handle of an item accepted earlier (also before a restart).

        An unfinished item's handle follows it live; a finished one's answers from
        history. An item history does not know ends with an empty outcome.
        """
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        pending = self.inbox_log.pending_item(agent_id, item_id)
        if pending is not None:
            return pending.turn.follower()
        return Turn(
            agent_id, item_id, duplicate=True, history=partial(self._ended_turn, agent_id, item_id)
        )

    async def _ended_turn(
        self, agent_id: str, item_id: str
    ) -> tuple[list[OutgoingMessage], TurnOutcome]:
        await self.store.writer.flush()  # its last records may still be queued
        records = await asyncio.to_thread(self.store.read_history, agent_id, repair=False)
        progress = turn_progress(records, item_id)
        descriptor = self.descriptor_of(agent_id)
        replies = [
            outgoing_message(descriptor, agent_id, item_id, outgoing_id, text, final)
            for outgoing_id, text, final in progress.outgoing
        ]
        return replies, outcome_of(progress)

    async def warm(self, agent_id: str) -> None:
        """Load an agent that is about to get work, and keep it from the idle sweep a while."""
        agent = await self.residency.wake(agent_id)
        agent.last_active = self._monotonic()

    def abort(self, agent_id: str) -> bool:
        """``/stop``: cancel the agent's running turn; False if none is running."""
        agent = self.residency.loaded.get(agent_id)
        return agent.abort() if agent is not None else False

    async def reset(
        self, agent_id: str, message: str | None = None, *, item_id: str | None = None
    ) -> Turn:
        """Queue a reset of the agent's context. An ``item_id`` seen before (a
        connector's ``/reset`` delivered again) resets nothing a second time."""
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        context = {"message": message} if message else {}
        return await self._accept(agent_id, "reset", item_id, "", context)

    async def _accept(
        self,
        agent_id: str,
        kind: ItemKind,
        item_id: str | None,
        text: str,
        context: dict[str, Any],
    ) -> Turn:
        (turn,) = await self._accept_many([(agent_id, kind, item_id, text, context)])
        return turn

    async def submit_many(self, submissions: list[Submission]) -> list[Turn]:
        """Several messages to agents (by id) at once: one batch, one sync.

        For schedules that fire many runs together: every item is queued before any
        is awaited, so they all share the writer's next sync.
        """
        for submission in submissions:
            if submission.agent_id not in self.directory:
                raise AgentNotFound(submission.agent_id)
        return await self._accept_many(
            [
                (
                    s.agent_id,
                    "message",
                    s.message_id,
                    s.text,
                    {**s.context, "origin": s.origin} if s.origin else dict(s.context),
                )
                for s in submissions
            ]
        )

    async def _accept_many(
        self, posts: list[tuple[str, ItemKind, str | None, str, dict[str, Any]]]
    ) -> list[Turn]:
        """The one admission path: wake each agent, queue every item, wait for the sync."""
        if self._stopping:
            raise EngineStopping("the engine is shutting down")
        agents: dict[str, Agent] = {}
        for agent_id in {post[0] for post in posts}:
            while True:
                agent = await self.residency.wake(agent_id)
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
        durables = [item.durable for item in queued if item.durable is not None]
        if durables:
            # Waiting on the futures themselves (not a task per item) wakes this poster
            # before the agents start on the work.
            await asyncio.wait(durables)
        failure: BaseException | None = None
        for item in queued:
            assert item.durable is not None
            error = item.durable.exception()
            if error is not None:
                agents[item.agent_id].forget(item.id)
                self.inbox_log.forget(item)
                failure = failure or error
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
        if agent.has_seen(item_id):
            return None
        item = InboxItem(
            kind=kind,
            id=item_id,
            agent_id=agent.id,
            at=self.runtime.now_ms(),
            text=text,
            context=context,
        )
        agent.remember(item_id)
        # Queue in memory now so the inbox order is the log order; the runner
        # waits for durability before it processes the item.
        self.inbox_log.accept(item)
        agent.inbox.push(item)
        if isinstance(agent.descriptor, UserDescriptor):
            self.directory.touch(agent.id)
        self._schedule(agent)
        return item

    # -- running ----------------------------------------------------------------

    def _schedule(self, agent: Agent) -> None:
        if agent.running or not len(agent.inbox) or self._stopping:
            return
        agent.running = True
        task = asyncio.create_task(self._run(agent))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, agent: Agent) -> None:
        try:
            async with self._semaphore:
                for _ in range(RUN_BATCH):
                    if self._stopping:
                        return
                    item = agent.inbox.pop()
                    if item is None:
                        return
                    await self._process(agent, item)
        finally:
            agent.running = False
            agent.last_active = self._monotonic()
            self._schedule(agent)

    async def _process(self, agent: Agent, item: InboxItem) -> None:
        if item.durable is not None:
            try:
                await item.durable
            except Exception:
                return  # never accepted: the poster was told
            # One more turn of the loop: every poster whose item became durable in
            # this batch hears so before any agent starts on the work (posters wait
            # through a shield, one callback further down the queue).
            await asyncio.sleep(0)
        try:
            outcome = await agent.process(item)
            if item.kind == "message" and isinstance(agent.descriptor, SubagentDescriptor):
                await self._report_to_parent(agent, item, outcome)
        except asyncio.CancelledError:
            raise  # shutdown: the item stays pending in the log and resumes next boot
        except EngineStopping:
            return  # its result could not be posted: pending, finished again next boot
        except OSError as exc:
            self.residency.suspend(agent, item, exc)
            return
        except Exception:
            # A bug must not wedge the inbox behind a message that always fails.
            log.exception(
                "processing an inbox item failed",
                extra={"action": "agent.item_failed", "agentId": agent.id, "itemId": item.id},
            )
            outcome = TurnOutcome(UNEXPECTED_ERROR, failed=True)
        self.inbox_log.mark_done(item)
        item.turn.ended(outcome)

    async def unload_idle(self, *, older_than_s: float | None = None) -> int:
        return await self.residency.unload_idle(older_than_s=older_than_s)

    # -- queries ------------------------------------------------------------------

    def list_agents(self) -> list[dict[str, Any]]:
        residency = self.residency
        result: list[dict[str, Any]] = []
        for entry in self.directory:
            agent_id = entry.agent_id
            agent = residency.loaded.get(agent_id)
            listed = self.directory.listing(agent_id, residency.live_updated_at(agent_id))
            listed["lifecycle"] = "active" if agent is not None else "sleeping"
            listed["pending"] = len(agent.inbox) if agent is not None else 0
            if agent_id in residency.problems:
                listed["problem"] = residency.problems[agent_id].to_dict()
            result.append(listed)
        result.sort(key=lambda item: item["updatedAt"], reverse=True)
        return result

    def background_agents(self) -> list[dict[str, Any]]:
        """Subagents as persisted on disk (no live inbox status, seed 000)."""
        return self.directory.background_agents()

    async def history(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> HistoryPage:
        """Records numbered from 0 (``seq``), ``limit`` at most, oldest first."""
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        await self.runtime.store.writer.flush()
        records = await asyncio.to_thread(self.store.read_history, agent_id, repair=False)
        numbered = [{"seq": seq, **record} for seq, record in enumerate(records)]
        if after is not None:
            page = numbered[after + 1 : after + 1 + limit]
        else:
            end = len(numbered) if before is None else max(0, min(before, len(numbered)))
            page = numbered[max(0, end - limit) : end]
        return HistoryPage(page, len(numbered))

    def pending_count(self) -> int:
        return self.inbox_log.pending_count
