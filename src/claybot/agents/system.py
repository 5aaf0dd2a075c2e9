"""AgentSystem: the agent runtime's front door.

It resolves targets to agents, admits items to their inboxes through one path
(``submit``, ``submit_many``, ``reset``: each returns a ``Turn``), and runs them:
each agent processes at most one item at a time, at most ``max_concurrent``
agents at once. Behind it, each reached by callers through a named part:
``directory`` (every agent: ``system.directory.entry(agent_id)``), ``listings``
(what is shown of them), ``histories`` (reading their records), ``subagents``
(starting background agents), and inside, the agents in memory (``residency.py``),
admission (``admission.py``) and the turn loop (``turn_loop.py``). What it keeps
is what changes work: boot and shutdown, posting, and running the inboxes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from claybot.agents.admission import Admissions, EngineStopping
from claybot.agents.agent import UNEXPECTED_ERROR, Agent, AgentRuntime, DeliveryHeld
from claybot.agents.descriptors import (
    AgentDescriptor,
    SubagentDescriptor,
    UserDescriptor,
    user_key,
)
from claybot.agents.directory import AgentDirectory, AgentNotFound
from claybot.agents.durable_port import AgentStoreError
from claybot.agents.histories import AgentHistories
from claybot.agents.inbox import InboxItem, ItemKind
from claybot.agents.listings import AgentListings
from claybot.agents.residency import Residency, StorageFull
from claybot.agents.subagents import SubagentLimit, SubagentLimits, Subagents
from claybot.agents.turn import Turn, TurnOutcome
from claybot.connectors.base import InboundMessage
from claybot.kernel.errors import ClayError
from claybot.kernel.ids import IdFactory, new_id
from claybot.kernel.supervise import Supervisor
from claybot.permissions.model import Permissions
from claybot.permissions.tags import revoked_tag

__all__ = [
    "AgentNotFound",
    "AgentSystem",
    "EngineStopping",
    "MessageTooLarge",
    "StorageFull",
    "SubagentLimit",
    "SubagentLimits",
    "Submission",
]

log = logging.getLogger(__name__)

RUN_BATCH = 32  # items an agent processes before letting other agents run
CHECKPOINT_INTERVAL_S = 60.0  # bounds how much journal a boot replays


class MessageTooLarge(ClayError, ValueError):
    """Inbound text over the engine's limit (settings: agents.maxMessageBytes)."""

    code = "too_large"
    status = 413

    def __init__(self, message: str) -> None:
        super().__init__(message, field="text")


@dataclass(frozen=True)
class Submission:
    """One message of ``submit_many``: to an agent id, like ``submit``."""

    agent_id: str
    text: str
    message_id: str | None = None
    origin: str | None = None
    context: dict[str, Any] = field(default_factory=dict)


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
        self._store = runtime.store
        self._inbox_log = runtime.inbox_log
        self.directory = AgentDirectory(runtime.store)
        self.residency = Residency(
            runtime,
            self.directory,
            idle_unload_s=idle_unload_s,
            resumed=self._schedule,
            stopping=lambda: self._stopping,
            monotonic=monotonic,
        )
        self._max_message_bytes = max_message_bytes
        self._new_id = id_factory
        self._monotonic = monotonic
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._admissions = Admissions(
            directory=self.directory,
            residency=self.residency,
            new_id=id_factory,
            runtime=runtime,
            monotonic=monotonic,
            schedule=self._schedule,
            stopping=lambda: self._stopping,
        )
        self.subagents = Subagents(
            subagent_limits or SubagentLimits(),
            self.directory,
            self.residency,
            self._admissions,
            id_factory,
        )
        self.listings = AgentListings(
            self.directory, self.residency, runtime.store, runtime.inbox_log
        )
        self.histories = AgentHistories(self.directory, runtime.store)
        self._tasks: set[asyncio.Task[None]] = set()
        self.side_tasks = Supervisor()  # the sweeper, the state flush, the checkpoint
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------

    async def boot(self) -> int:
        """Load the index and the inbox log; the agents with unfinished items wait for
        ``resume_recovered``."""
        recovered = await self._inbox_log.recover()  # first: it puts a crash right
        for entry in await self._store.load_index():
            self.directory.add(entry)
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
                self._inbox_log.mark_done(item)
        self.side_tasks.start("agents-idle-sweeper", self.residency.sweep_idle)
        self.side_tasks.start("agents-state-flush", self.residency.flush_states_periodically)
        self.side_tasks.start("agents-checkpoint", self._checkpoint_periodically)
        return len(recovered)

    async def resume_recovered(self) -> None:
        """Wake the agents with unfinished items, once the connectors their replies go
        through are loaded: a reply (or a file) that was recorded but not sent before a
        crash is sent again, and one resent before its connector is back would be lost.
        An agent a new message woke meanwhile has its recovered items already."""
        for agent_id in list(self.residency.recovered):
            agent = await self.residency.wake(agent_id)
            self._schedule(agent)

    async def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Stop taking items; let running turns finish, leaving the rest durably pending."""
        self._stopping = True
        self.residency.cancel_resumes()
        await self.side_tasks.stop()
        running = [task for task in self._tasks if not task.done()]
        if running:
            _, stragglers = await asyncio.wait(running, timeout=drain_timeout_s)
            for task in stragglers:
                task.cancel()
            if stragglers:
                await asyncio.wait(stragglers)
        await self.residency.flush_states()
        try:
            await self._inbox_log.checkpoint()
        except OSError as exc:
            # The journal stays as it is and is replayed at the next start.
            log.error(
                "no checkpoint at shutdown: %s", exc, extra={"action": "agents.checkpoint_failed"}
            )

    async def _checkpoint_periodically(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            if self._inbox_log.appended_since_checkpoint:
                try:
                    await self._inbox_log.checkpoint()
                except OSError as exc:  # a full disk: the next interval tries again
                    log.error(
                        "checkpoint failed: %s", exc, extra={"action": "agents.checkpoint_failed"}
                    )

    # -- looking agents up (the rest is on ``directory``) -------------------------

    def exists(self, agent_id: str) -> bool:
        return agent_id in self.directory

    def descriptor_of(self, agent_id: str) -> AgentDescriptor:
        """What the agent represents (``AgentNotFound`` if there is none)."""
        return self.directory.entry(agent_id).descriptor

    def agent_id_for(self, descriptor: AgentDescriptor) -> str | None:
        """The agent id a descriptor maps to, without creating one."""
        return self.directory.id_for(descriptor)

    # -- posting --------------------------------------------------------------

    async def resolve(
        self, descriptor: AgentDescriptor, *, permissions: Permissions | None = None
    ) -> str:
        """The agent id for a descriptor, creating the agent on first use.

        ``permissions`` are what a newly created agent starts with (default: the
        runtime's defaults); an existing agent keeps its own.
        """
        return await self._admissions.resolve(descriptor, permissions=permissions)

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
            self._check_size(text)
            agent_id = await self.resolve(target)
        item_context = dict(context or {})
        if origin:
            item_context["origin"] = origin
        return await self._accept(agent_id, "message", message_id, text, item_context)

    async def submit_inbound(self, message: InboundMessage) -> Turn:
        """A connector's message, to the agent of its conversation."""
        context: dict[str, Any] = {"connector": message.connector}
        if message.metadata:
            context["metadata"] = message.metadata
        if message.files:
            context["files"] = [file.to_dict() for file in message.files]
        # The conversation's agent by its key, without making (and validating) its
        # descriptor on every message: a key the directory holds was validated when its
        # agent was created, and an invalid conversation has none.
        agent_id = self.directory.id_for_key(
            user_key(message.connector, message.user_id, message.channel_id)
        )
        if agent_id is None:
            target: str | AgentDescriptor = UserDescriptor(
                connector=message.connector, userId=message.user_id, channelId=message.channel_id
            )
        else:
            self._check_size(message.text)
            target = agent_id
        return await self.submit(
            target, message.text, message_id=message.message_id, context=context
        )

    def _check_size(self, text: str) -> None:
        """What people send (a connector's message) is held to the engine's limit."""
        size = len(text.encode())
        if size > self._max_message_bytes:
            raise MessageTooLarge(f"text is {size} bytes; the limit is {self._max_message_bytes}")

    # -- agents' work ------------------------------------------------------------

    async def permissions_of(self, agent_id: str) -> Permissions:
        agent = self.residency.loaded.get(agent_id)
        if agent is not None:
            return agent.state.permissions
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        try:
            state = await self._store.read_state(agent_id)
        except AgentStoreError:
            state = None  # unreadable grants grant nothing
        return state.permissions if state is not None else Permissions()

    def turn(self, agent_id: str, item_id: str) -> Turn:
        """The handle of an item accepted earlier (also before a restart): live while it
        is unfinished, answered from history once it ended."""
        return self._admissions.turn(agent_id, item_id)

    async def warm(self, agent_id: str) -> None:
        """Load an agent that is about to get work, and keep it from the idle sweep a while."""
        agent = await self.residency.wake(agent_id)
        agent.last_active = self._monotonic()

    def abort(self, agent_id: str) -> bool:
        """``/stop``: cancel the agent's running turn; False if none is running."""
        agent = self.residency.loaded.get(agent_id)
        return agent.abort() if agent is not None else False

    def stop(self, agent_id: str) -> bool:
        """``abort`` for an agent named from outside: ``AgentNotFound`` if there is none."""
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        return self.abort(agent_id)

    async def reset_within(self, agent_id: str, message: str | None, wait_s: float) -> bool:
        """Reset the agent's context and wait up to ``wait_s`` for it: False when a long
        turn is still running after that (the reset is queued behind it)."""
        turn = await self.reset(agent_id, message)
        try:
            await turn.outcome(wait_s)
        except TimeoutError:
            return False
        return True

    async def reset(
        self, agent_id: str, message: str | None = None, *, item_id: str | None = None
    ) -> Turn:
        """Queue a reset of the agent's context. An ``item_id`` seen before (a
        connector's ``/reset`` delivered again) resets nothing a second time."""
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        context = {"message": message} if message else {}
        return await self._accept(agent_id, "reset", item_id, "", context)

    async def revoke_grant(self, agent_id: str, permission: str) -> Turn:
        """Queue taking a grant back (``@read:/abs``, ``@write:/abs``, ``@network``): it
        is applied in the agent's inbox order, as grants are (``PermissionTagError``
        for a malformed tag)."""
        if agent_id not in self.directory:
            raise AgentNotFound(agent_id)
        tag = revoked_tag(permission)
        return await self._accept(agent_id, "revoke", None, "", {"permission": str(tag)})

    async def _accept(
        self,
        agent_id: str,
        kind: ItemKind,
        item_id: str | None,
        text: str,
        context: dict[str, Any],
    ) -> Turn:
        (turn,) = await self._admissions.accept([(agent_id, kind, item_id, text, context)])
        return turn

    async def submit_many(self, submissions: list[Submission]) -> list[Turn]:
        """Several messages to agents (by id) at once: one batch, one sync.

        For schedules that fire many runs together: every item is queued before any
        is awaited, so they all share the writer's next sync.
        """
        for submission in submissions:
            if submission.agent_id not in self.directory:
                raise AgentNotFound(submission.agent_id)
        return await self._admissions.accept(
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
        started = self._monotonic()
        try:
            outcome = await agent.process(item)
            if item.kind == "message" and isinstance(agent.descriptor, SubagentDescriptor):
                await self.subagents.report(agent, item, outcome)
        except asyncio.CancelledError:
            raise  # shutdown: the item stays pending in the log and resumes next boot
        except (EngineStopping, DeliveryHeld):
            # Its result could not be posted, or its replies could not go out: pending,
            # and the next boot delivers what the transcript holds unmarked.
            return
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
        self._inbox_log.mark_done(item)
        self.residency.got_through(agent.id)
        item.turn.ended(outcome)
        if item.kind == "message":
            self.runtime.meter.turn_ended(outcome, self._monotonic() - started)

    async def unload_idle(self, *, older_than_s: float | None = None) -> int:
        return await self.residency.unload_idle(older_than_s=older_than_s)

    # -- counts ---------------------------------------------------------------------

    @property
    def loaded_count(self) -> int:
        return len(self.residency.loaded)

    def pending_count(self) -> int:
        return self._inbox_log.pending_count
