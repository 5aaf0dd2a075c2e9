"""AgentSystem: resolves targets to agents, keeps their inboxes, runs them.

- A descriptor maps to one agent id forever (``descriptor_key``).
- Each agent runs at most one item at a time; at most ``max_concurrent`` agents
  run at once.
- Idle agents are unloaded (``agent.sleep``) and loaded again by their next item
  (``agent.woke``), so agents at rest cost only an index entry.
- Restore is lazy: boot reads the index and the inbox log; an agent is restored
  from its history (``agent.restored``) when it first has work, which at boot
  means every agent with unfinished items.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from claybot.agents.agent import Agent, AgentRuntime, TurnOutcome
from claybot.agents.descriptors import (
    AgentDescriptor,
    FetchStrategy,
    HeartbeatDescriptor,
    SubagentDescriptor,
    UserDescriptor,
    descriptor_key,
    descriptor_label,
    descriptor_to_dict,
)
from claybot.agents.history import Record, start_record, turn_progress
from claybot.agents.inbox import InboxItem
from claybot.agents.state import AgentState
from claybot.agents.store import AgentProblem, AgentStoreError, IndexEntry
from claybot.connectors.base import InboundMessage, PostedMessage
from claybot.kernel.ids import IdFactory, new_id
from claybot.kernel.memory import release_freed_memory
from claybot.kernel.supervise import Supervisor
from claybot.permissions.model import Permissions

log = logging.getLogger(__name__)

RUN_BATCH = 32  # items an agent processes before letting other agents run
OUTCOMES_KEPT = 10_000  # recent outcomes of items with an origin, for callers that wait
RELEASE_MEMORY_EVERY = 100  # unloads between two returns of freed memory to the system
STATE_FLUSH_INTERVAL_S = 5.0
CHECKPOINT_INTERVAL_S = 60.0  # bounds how much journal a boot replays
RESUME_FIRST_S = 0.1  # after a write failed: first retry of the agent's turn
RESUME_MAX_S = 5.0


class AgentNotFound(LookupError):
    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no agent with id {agent_id!r}")
        self.agent_id = agent_id


class MessageTooLarge(ValueError):
    pass


class EngineStopping(RuntimeError):
    pass


class StorageFull(OSError):
    """Nothing can be accepted for an agent until the disk takes writes again."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(
            errno.ENOSPC,
            f"the disk is full: agent {agent_id}'s work waits for space to be written",
        )


class SubagentLimit(ValueError):
    """Starting another background agent would pass a nesting or children limit."""


@dataclass(frozen=True)
class SubagentLimits:
    max_depth: int = 3  # a user agent's subagent is depth 1
    max_busy_children: int = 8  # children with unfinished work, per parent


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
        runtime.on_turn_end = self._turn_ended
        self.subagent_limits = subagent_limits or SubagentLimits()
        self.store = runtime.store
        self.inbox_log = runtime.inbox_log
        self.events = runtime.events
        self._idle_unload_s = idle_unload_s
        self._max_message_bytes = max_message_bytes
        self._new_id = id_factory
        self._monotonic = monotonic
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._entries: dict[str, IndexEntry] = {}
        self._by_key: dict[str, str] = {}
        self._loaded: dict[str, Agent] = {}
        self._loading: dict[str, asyncio.Future[Agent]] = {}
        self._creating: dict[str, asyncio.Future[str]] = {}
        self._recovered: dict[str, list[InboxItem]] = {}
        self._restored: set[str] = set()
        self._updated: dict[str, int] = {}
        # Recency of foreground activity since boot; milliseconds tie too easily.
        self._touched: dict[str, int] = {}
        self._touch_seq = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.side_tasks = Supervisor()  # the sweeper, the state flush, the checkpoint
        self._stopping = False
        # Agents whose turn a failed write stopped: unloaded, their items waiting in
        # _recovered, and a task that loads them again once the disk takes writes.
        self._suspended: dict[str, asyncio.Task[None]] = {}
        self._problems: dict[str, AgentProblem] = {}  # damaged files found while loading
        self._outcomes: OrderedDict[tuple[str, str], TurnOutcome] = OrderedDict()
        self._unloads_unreleased = 0

    # -- lifecycle ------------------------------------------------------------

    async def boot(self) -> int:
        """Load the index and the inbox log; wake agents with unfinished items."""
        await asyncio.to_thread(self.inbox_log.replay, self.store.root.parent)
        entries = await asyncio.to_thread(self.store.load_index)
        for entry in entries:
            self._index(entry)
        recovered = await asyncio.to_thread(self.inbox_log.recover)
        for item in recovered:
            if item.agent_id in self._entries:
                self._recovered.setdefault(item.agent_id, []).append(item)
            else:
                # Its agent folder is gone (removed by hand): nobody can process it.
                log.error(
                    "dropping an inbox item of a missing agent",
                    extra={"action": "inbox.orphan", "agentId": item.agent_id, "itemId": item.id},
                )
                self.inbox_log.mark_done(item)
        for agent_id in list(self._recovered):
            agent = await self._wake(agent_id)
            self._schedule(agent)
        self.side_tasks.start("agents-idle-sweeper", self._sweep_idle)
        self.side_tasks.start("agents-state-flush", self._flush_states_periodically)
        self.side_tasks.start("agents-checkpoint", self._checkpoint_periodically)
        return len(recovered)

    async def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Stop taking items; let running turns finish, leaving the rest durably pending."""
        self._stopping = True
        for task in self._suspended.values():
            task.cancel()
        await self.side_tasks.stop()
        running = [task for task in self._tasks if not task.done()]
        if running:
            _, stragglers = await asyncio.wait(running, timeout=drain_timeout_s)
            for task in stragglers:
                task.cancel()
            if stragglers:
                await asyncio.wait(stragglers)
        await self._flush_states()
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

    # -- index ----------------------------------------------------------------

    def _index(self, entry: IndexEntry) -> None:
        self._entries[entry.agent_id] = entry
        self._by_key[descriptor_key(entry.descriptor)] = entry.agent_id

    def exists(self, agent_id: str) -> bool:
        return agent_id in self._entries

    def descriptor_of(self, agent_id: str) -> AgentDescriptor:
        entry = self._entries.get(agent_id)
        if entry is None:
            raise AgentNotFound(agent_id)
        return entry.descriptor

    @property
    def agent_count(self) -> int:
        return len(self._entries)

    @property
    def loaded_count(self) -> int:
        return len(self._loaded)

    async def resolve(
        self, descriptor: AgentDescriptor, *, permissions: Permissions | None = None
    ) -> str:
        """The agent id for a descriptor, creating the agent on first use.

        ``permissions`` are what a newly created agent starts with (default: the
        runtime's defaults); an existing agent keeps its own.
        """
        key = descriptor_key(descriptor)
        agent_id = self._by_key.get(key)
        if agent_id is not None:
            return agent_id
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
                processed=asyncio.get_running_loop().create_future(),
            )
            await self.inbox_log.accept(first)
        entry = IndexEntry(agent_id, descriptor, now)
        try:
            await self.store.create(entry, state, start_record(now, descriptor_to_dict(descriptor)))
        except BaseException:
            if first is not None:
                self.inbox_log.mark_done(first)  # its agent never came to be
            raise
        self._index(entry)
        self._updated[agent_id] = now
        self._touch_seq += 1
        self._touched[agent_id] = self._touch_seq
        agent = Agent(agent_id, descriptor, state, [start_record(now)], self.runtime)
        agent.last_active = self._monotonic()
        self._loaded[agent_id] = agent
        self._restored.add(agent_id)
        self.events.emit(
            "agent.created",
            {"agentId": agent_id, "descriptor": descriptor_to_dict(descriptor), "source": "agent"},
        )
        if first is not None:
            agent.remember(first.id)
            agent.inbox.push(first)
            self._schedule(agent)
        return agent_id

    async def _wake(self, agent_id: str) -> Agent:
        agent = self._loaded.get(agent_id)
        if agent is not None:
            return agent
        pending = self._loading.get(agent_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Agent] = asyncio.get_running_loop().create_future()
        self._loading[agent_id] = future
        try:
            agent = await self._load(agent_id)
            future.set_result(agent)
            return agent
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            del self._loading[agent_id]

    async def _load(self, agent_id: str) -> Agent:
        entry = self._entries.get(agent_id)
        if entry is None:
            raise AgentNotFound(agent_id)
        if agent_id in self._suspended:
            # Its records the disk refused may still be queued for another try: read
            # its files only once they were written (or dropped), never before. A batch
            # in flight may fail again and queue them anew, so look once it has ended.
            writer = self.runtime.store.writer
            await writer.settled()
            if writer.backlog:
                raise StorageFull(agent_id)
            resumer = self._suspended.pop(agent_id)
            if resumer is not asyncio.current_task():
                resumer.cancel()  # a message woke it first
        first_load = agent_id not in self._restored
        # Unloading flushed this agent's appends; a torn tail can only come from a
        # crash, so the file is repaired on the first load after boot.
        state, records, problem = await asyncio.to_thread(self._read_agent, agent_id, first_load)
        if problem is not None:
            self._problems[agent_id] = problem
            self.events.emit("agent.damaged", problem.to_dict())
        agent = Agent(agent_id, entry.descriptor, state, records, self.runtime)
        agent.last_active = self._monotonic()
        for item in self._recovered.pop(agent_id, []):
            progress = turn_progress(records, item.id)
            if progress.started or progress.done:
                agent.resume_from(item.id, progress)
            agent.remember(item.id)
            agent.inbox.push(item)
        self._loaded[agent_id] = agent
        if first_load:
            self._restored.add(agent_id)
            self.events.emit("agent.restored", {"agentId": agent_id})
        else:
            self.events.emit("agent.woke", {"agentId": agent_id})
        return agent

    def _read_agent(
        self, agent_id: str, repair: bool
    ) -> tuple[AgentState, list[Record], AgentProblem | None]:
        problem = None
        try:
            state = self.store.read_state(agent_id)
        except AgentStoreError as exc:
            # The conversation goes on; its grants, which cannot be read, start from
            # nothing (the agent may ask again), and the file is kept for its owner.
            aside = self.store.set_aside_state(agent_id)
            problem = AgentProblem(
                agent_id,
                str(aside.with_name("state.json")),
                str(exc),
                f"started again with no permissions; the damaged file is kept as {aside}",
            )
            log.error(
                "%s; the agent %s",
                exc,
                problem.action,
                extra={"action": "agents.state_damaged", "agentId": agent_id},
            )
            state = None
        records = self.store.read_history(agent_id, repair=repair)
        if state is None:
            now = self.runtime.now_ms()
            created = self._entries[agent_id].created_at or now
            state = AgentState(createdAt=created, updatedAt=now)
        return state, records, problem

    def problems(self) -> list[dict[str, str]]:
        """Damaged agent files: those that could not be routed at boot, and those found
        while loading (a state.json that did not validate)."""
        found = [*self.store.unroutable, *self._problems.values()]
        return [problem.to_dict() for problem in found]

    # -- posting --------------------------------------------------------------

    async def post_message(self, message: InboundMessage) -> PostedMessage:
        """Accept a connector message: durable in the agent's inbox when this returns."""
        size = len(message.text.encode())
        if size > self._max_message_bytes:
            raise MessageTooLarge(f"text is {size} bytes; the limit is {self._max_message_bytes}")
        descriptor = UserDescriptor(
            connector=message.connector, userId=message.user_id, channelId=message.channel_id
        )
        agent_id = await self.resolve(descriptor)
        context: dict[str, Any] = {"connector": message.connector}
        if message.metadata:
            context["metadata"] = message.metadata
        item = await self._accept(agent_id, "message", message.message_id, message.text, context)
        if item is None:
            return PostedMessage(agent_id, message.message_id or "", duplicate=True)
        return PostedMessage(agent_id, item.id, duplicate=False)

    async def post_to_agent(
        self,
        agent_id: str,
        text: str,
        *,
        message_id: str | None = None,
        origin: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> InboxItem | None:
        """Post a (system) message straight to an agent id; None if ``message_id`` was seen."""
        if agent_id not in self._entries:
            raise AgentNotFound(agent_id)
        item_context = dict(context or {})
        if origin:
            item_context["origin"] = origin
        return await self._accept(agent_id, "message", message_id, text, item_context)

    # -- subagents ----------------------------------------------------------------

    def depth_of(self, agent_id: str) -> int:
        """0 for user, cron and heartbeat agents; a subagent is one deeper than its parent."""
        depth = 0
        seen: set[str] = set()
        entry = self._entries.get(agent_id)
        while entry is not None and isinstance(entry.descriptor, SubagentDescriptor):
            if agent_id in seen:  # a cycle can only come from hand-edited files
                break
            seen.add(agent_id)
            depth += 1
            agent_id = entry.descriptor.parentAgentId
            entry = self._entries.get(agent_id)
        return depth

    def busy_children(self, parent_id: str) -> int:
        count = 0
        for agent_id, entry in self._entries.items():
            descriptor = entry.descriptor
            if isinstance(descriptor, SubagentDescriptor) and descriptor.parentAgentId == parent_id:
                agent = self._loaded.get(agent_id)
                if (agent is not None and agent.busy) or agent_id in self._recovered:
                    count += 1
        return count

    async def permissions_of(self, agent_id: str) -> Permissions:
        agent = self._loaded.get(agent_id)
        if agent is not None:
            return agent.state.permissions
        if agent_id not in self._entries:
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
        if parent_id not in self._entries:
            raise AgentNotFound(parent_id)
        limits = self.subagent_limits
        depth = self.depth_of(parent_id) + 1
        if depth > limits.max_depth:
            raise SubagentLimit(
                f"background agents may nest {limits.max_depth} deep; this one would be "
                f"at depth {depth}. Do the work here or report back to your parent instead."
            )
        busy = self.busy_children(parent_id)
        if busy >= limits.max_busy_children:
            raise SubagentLimit(
                f"this agent already has {busy} background agents at work (the limit is "
                f"{limits.max_busy_children}); wait for one to report back first."
            )
        agent_id = self._new_id()
        descriptor = SubagentDescriptor(id=agent_id, parentAgentId=parent_id, name=name)
        await self._create(
            descriptor,
            agent_id=agent_id,
            permissions=permissions,
            first_message=(prompt, parent_id),
        )
        return agent_id

    async def _turn_ended(self, agent: Agent, item: InboxItem, outcome: TurnOutcome) -> None:
        """A subagent's turn ended: its parent gets the result, or one failure notice.

        The notice's message id is derived from the subagent's item, so a restart
        that resumes this turn posts it again and the parent's inbox drops it.
        """
        # Only items posted with an origin (cron, heartbeat, subagent results) are ever
        # waited on; a connector's message gets its reply delivered, and keeping its
        # outcome only held memory (10,000 of them after any busy hour).
        if "origin" in item.context:
            self._outcomes[(agent.id, item.id)] = outcome
            if len(self._outcomes) > OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
        descriptor = agent.descriptor
        if not isinstance(descriptor, SubagentDescriptor):
            return
        parent_id = descriptor.parentAgentId
        if parent_id not in self._entries:
            log.warning(
                "a subagent's parent is gone; its result is dropped",
                extra={"action": "subagent.orphan", "agentId": agent.id, "parentId": parent_id},
            )
            return
        who = f'Background agent "{descriptor.name}" ({agent.id})'
        if outcome.failed:
            text = f"{who} failed: {outcome.text}"
        else:
            text = f"{who} finished:\n{outcome.text or '(no answer)'}"
        await self.post_to_agent(
            parent_id, text, message_id=f"{agent.id}:{item.id}:result", origin=agent.id
        )
        self.events.emit(
            "agent.subagent.failed" if outcome.failed else "agent.subagent.finished",
            {"agentId": agent.id, "parentAgentId": parent_id, "messageId": item.id},
        )

    async def wait_processed(self, agent_id: str, item_id: str) -> TurnOutcome | None:
        """Until the item is processed (at once if it already was); its outcome if known
        (kept for the last ``OUTCOMES_KEPT`` items posted with an origin)."""
        item = self.inbox_log.pending_item(agent_id, item_id)
        if item is not None:
            if item.processed is None:  # recovered at boot: nobody was waiting yet
                item.processed = asyncio.get_running_loop().create_future()
            await asyncio.shield(item.processed)
        return self._outcomes.get((agent_id, item_id))

    async def warm(self, agent_id: str) -> None:
        """Load an agent that is about to get work, and keep it from the idle sweep a while."""
        agent = await self._wake(agent_id)
        agent.last_active = self._monotonic()

    def abort(self, agent_id: str) -> bool:
        """``/stop``: cancel the agent's running turn; False if none is running."""
        agent = self._loaded.get(agent_id)
        return agent.abort() if agent is not None else False

    def agent_id_for(self, descriptor: AgentDescriptor) -> str | None:
        """The agent id a descriptor maps to, without creating one."""
        return self._by_key.get(descriptor_key(descriptor))

    async def reset(
        self, agent_id: str, message: str | None = None, *, item_id: str | None = None
    ) -> InboxItem | None:
        """Queue a reset of the agent's context; None when ``item_id`` was seen before
        (a connector's ``/reset`` delivered again), which resets nothing a second time."""
        context = {"message": message} if message else {}
        return await self._accept(agent_id, "reset", item_id, "", context)

    async def _accept(
        self,
        agent_id: str,
        kind: str,
        item_id: str | None,
        text: str,
        context: dict[str, Any],
    ) -> InboxItem | None:
        if self._stopping:
            raise EngineStopping("the engine is shutting down")
        while True:
            agent = await self._wake(agent_id)
            if not agent.unloaded:
                break
        item = self._enqueue(agent, kind, item_id, text, context)
        if item is None:
            return None
        await self._settle(agent, item)
        return item

    def _enqueue(
        self,
        agent: Agent,
        kind: str,
        item_id: str | None,
        text: str,
        context: dict[str, Any],
    ) -> InboxItem | None:
        """Queue an item for a loaded agent; its ``durable`` future says when it is on disk."""
        item_id = item_id or self._new_id()
        if agent.has_seen(item_id):
            return None
        item = InboxItem(
            kind="reset" if kind == "reset" else "message",
            id=item_id,
            agent_id=agent.id,
            at=self.runtime.now_ms(),
            text=text,
            context=context,
            processed=asyncio.get_running_loop().create_future(),
        )
        agent.remember(item_id)
        # Queue in memory now so the inbox order is the log order; the runner
        # waits for durability before it processes the item.
        item.durable = self.inbox_log.accept(item)
        agent.inbox.push(item)
        if isinstance(agent.descriptor, UserDescriptor):
            self._touch_seq += 1
            self._touched[agent.id] = self._touch_seq
        self._schedule(agent)
        return item

    async def _settle(self, agent: Agent, item: InboxItem) -> None:
        """Wait until the item is durable; a failed append un-accepts it and raises."""
        assert item.durable is not None
        try:
            await asyncio.shield(item.durable)
        except Exception:
            agent.forget(item.id)
            self.inbox_log.forget(item)
            raise

    async def post_many(
        self, posts: list[tuple[str, str, str, dict[str, Any]]]
    ) -> list[InboxItem | None]:
        """Several (agent id, text, message id, context) at once: one batch, one sync.

        For schedules that fire many runs together: every item is queued before any
        is awaited, so they all share the writer's next sync. None marks a duplicate.
        """
        if self._stopping:
            raise EngineStopping("the engine is shutting down")
        agents: dict[str, Agent] = {}
        for agent_id in {post[0] for post in posts}:
            while True:
                agent = await self._wake(agent_id)
                if not agent.unloaded:
                    break
            agents[agent_id] = agent
        items = [
            self._enqueue(agents[agent_id], "message", message_id, text, context)
            for agent_id, text, message_id, context in posts
        ]
        queued = [item for item in items if item is not None]
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
        return items

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
            await agent.process(item)
        except asyncio.CancelledError:
            raise  # shutdown: the item stays pending in the log and resumes next boot
        except EngineStopping:
            return  # its result could not be posted: pending, finished again next boot
        except OSError as exc:
            self._suspend(agent, item, exc)
            return
        except Exception:
            # A bug must not wedge the inbox behind a message that always fails.
            log.exception(
                "processing an inbox item failed",
                extra={"action": "agent.item_failed", "agentId": agent.id, "itemId": item.id},
            )
        self.inbox_log.mark_done(item)
        if item.processed is not None and not item.processed.done():
            item.processed.set_result(None)

    def _suspend(self, agent: Agent, item: InboxItem, error: OSError) -> None:
        """A write failed in the middle of ``item``: stop this agent and try again later.

        The item was durably accepted, so it is not lost and must not be marked done.
        The agent leaves memory (what it holds may include records the disk refused)
        and is loaded again like after a crash: its history says how far the turn
        got, so a reply already written is delivered rather than generated twice.
        """
        log.error(
            "agent %s stopped: a write failed (%s); it resumes once the disk takes writes",
            agent.id,
            error.strerror or error,
            extra={"action": "agent.storage_failed", "agentId": agent.id, "errno": error.errno},
        )
        waiting = [item]
        while (queued := agent.inbox.pop()) is not None:
            waiting.append(queued)
        agent.unloaded = True
        if self._loaded.get(agent.id) is agent:
            del self._loaded[agent.id]
        self._restored.discard(agent.id)  # the next load repairs its history first
        self._recovered[agent.id] = [*waiting, *self._recovered.get(agent.id, [])]
        if agent.id not in self._suspended:
            self._suspended[agent.id] = asyncio.create_task(
                self._resume_later(agent.id), name=f"agent-resume-{agent.id}"
            )
        self.events.emit(
            "agent.storage_failed", {"agentId": agent.id, "error": error.strerror or str(error)}
        )

    async def _resume_later(self, agent_id: str) -> None:
        delay = RESUME_FIRST_S
        while not self._stopping:
            await asyncio.sleep(delay)
            delay = min(RESUME_MAX_S, delay * 2)
            try:
                agent = await self._wake(agent_id)
            except StorageFull:
                continue  # still full: later
            except Exception:
                log.exception(
                    "resuming an agent failed; trying again",
                    extra={"action": "agent.resume_failed", "agentId": agent_id},
                )
                continue
            self._schedule(agent)
            return

    # -- idle agents ------------------------------------------------------------

    async def _sweep_idle(self) -> None:
        interval = max(0.5, min(self._idle_unload_s / 2, 30.0))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.unload_idle()
            except OSError as exc:  # their states could not be written: they stay loaded
                log.error(
                    "idle agents not unloaded: %s", exc, extra={"action": "agents.unload_failed"}
                )

    async def unload_idle(self, *, older_than_s: float | None = None) -> int:
        threshold = self._idle_unload_s if older_than_s is None else older_than_s
        now = self._monotonic()
        idle = [
            agent
            for agent in self._loaded.values()
            if not agent.running and not len(agent.inbox) and now - agent.last_active >= threshold
        ]
        if not idle:
            return 0
        await self.runtime.store.writer.flush()
        # Their states go to disk first, all in one batch, while they are still loaded:
        # a message arriving meanwhile finds the agent in memory, never a stale file.
        await self.store.write_states(
            {agent.id: agent.state.model_dump(mode="json") for agent in idle if agent.state_dirty}
        )
        count = 0
        for agent in idle:
            if agent.running or len(agent.inbox) or self._loaded.get(agent.id) is not agent:
                continue  # got work while the states were written: it stays
            agent.unloaded = True
            agent.state_dirty = False
            del self._loaded[agent.id]
            self._updated[agent.id] = agent.state.updatedAt
            self.events.emit("agent.sleep", {"agentId": agent.id, "reason": "idle"})
            count += 1
        self._unloads_unreleased += count
        if self._unloads_unreleased >= RELEASE_MEMORY_EVERY:
            self._unloads_unreleased = 0
            release_freed_memory()
        return count

    async def _save_state(self, agent: Agent) -> None:
        if agent.state_dirty:
            agent.state_dirty = False
            await self.store.write_state(agent.id, agent.state)

    async def _flush_states(self) -> None:
        """Every loaded agent's changed state, in one batch (two syncs, not two per agent)."""
        dirty = [agent for agent in self._loaded.values() if agent.state_dirty]
        for agent in dirty:
            agent.state_dirty = False  # a change during the write sets it again
        try:
            await self.store.write_states(
                {agent.id: agent.state.model_dump(mode="json") for agent in dirty}
            )
        except OSError:
            for agent in dirty:
                agent.state_dirty = True  # written next time

    async def _flush_states_periodically(self) -> None:
        while True:
            await asyncio.sleep(STATE_FLUSH_INTERVAL_S)
            await self._flush_states()

    # -- queries ------------------------------------------------------------------

    def _updated_at(self, agent_id: str) -> int:
        agent = self._loaded.get(agent_id)
        if agent is not None:
            return agent.state.updatedAt
        known = self._updated.get(agent_id)
        if known is None:
            # Not touched since boot: the last history append is its last activity.
            known = self._updated[agent_id] = self.store.history_mtime_ms(agent_id)
        return known

    def agent_for(self, strategy: FetchStrategy) -> str | None:
        """Seed 003: the most recent user agent, or the most recent heartbeat agent."""
        wanted: type[UserDescriptor] | type[HeartbeatDescriptor]
        wanted = UserDescriptor if strategy == "most-recent-foreground" else HeartbeatDescriptor
        best: tuple[int, int, str] | None = None
        for agent_id, entry in self._entries.items():
            if isinstance(entry.descriptor, wanted):
                touched = self._touched.get(agent_id)
                # Anything touched since boot is more recent than anything that was not.
                candidate = (
                    (1, touched, agent_id)
                    if touched is not None
                    else (0, self._updated_at(agent_id), agent_id)
                )
                if best is None or candidate > best:
                    best = candidate
        return best[2] if best else None

    def list_agents(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = []
        for agent_id, entry in self._entries.items():
            agent = self._loaded.get(agent_id)
            result.append(
                {
                    "agentId": agent_id,
                    "descriptor": descriptor_to_dict(entry.descriptor),
                    "type": entry.descriptor.type,
                    "label": descriptor_label(entry.descriptor),
                    "createdAt": entry.created_at,
                    "updatedAt": self._updated_at(agent_id),
                    "lifecycle": "active" if agent is not None else "sleeping",
                    "pending": len(agent.inbox) if agent is not None else 0,
                    **(
                        {"problem": self._problems[agent_id].to_dict()}
                        if agent_id in self._problems
                        else {}
                    ),
                }
            )
        result.sort(key=lambda item: item["updatedAt"], reverse=True)
        return result

    def background_agents(self) -> list[dict[str, Any]]:
        """Subagents as persisted on disk (no live inbox status, seed 000)."""
        result = []
        for agent_id, entry in self._entries.items():
            descriptor = entry.descriptor
            if not isinstance(descriptor, SubagentDescriptor):
                continue
            try:
                state = self.store.read_state(agent_id)
            except AgentStoreError:
                state = None  # listed from its descriptor; the damage is in problems()
            result.append(
                {
                    "agentId": agent_id,
                    "name": descriptor.name,
                    "parentAgentId": descriptor.parentAgentId,
                    "createdAt": state.createdAt if state else entry.created_at,
                    "updatedAt": state.updatedAt if state else entry.created_at,
                    "status": "idle",
                }
            )
        return result

    async def history(
        self, agent_id: str, *, after: int | None, before: int | None, limit: int
    ) -> HistoryPage:
        """Records numbered from 0 (``seq``), ``limit`` at most, oldest first."""
        if agent_id not in self._entries:
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
