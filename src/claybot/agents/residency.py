"""Which agents are in memory: loading, idle unloading, and suspension on a full disk.

- Restore is lazy: an agent is restored from its files (``agent.restored``) when
  it first has work, which at boot means every agent with unfinished items.
- Idle agents are unloaded (``agent.sleep``) and loaded again by their next item
  (``agent.woke``), so agents at rest cost only their directory entry.
- An agent whose write failed (a full disk) is suspended: out of memory, its
  items kept, loaded again like after a crash once the disk takes writes. It is
  ``stuck`` (in the status, the listing and the dashboard) until one of its items
  gets through, and each failure in a row waits twice as long before the next try.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from claybot.agents.agent import SEEN_IDS_LIMIT, Agent, AgentRuntime
from claybot.agents.directory import AgentDirectory
from claybot.agents.durable_port import AgentProblem
from claybot.agents.history import HistoryTail, turn_progress
from claybot.agents.inbox import InboxItem
from claybot.agents.state import AgentState
from claybot.kernel.backoff import Backoff, backoff_s
from claybot.kernel.event_types import EventType
from claybot.kernel.memory import release_freed_memory

log = logging.getLogger(__name__)

RELEASE_MEMORY_EVERY = 100  # unloads between two returns of freed memory to the system
STATE_FLUSH_INTERVAL_S = 5.0
RESUME_FIRST_S = 0.1  # after a write failed: first retry of the agent's turn
RESUME_MAX_S = 30.0  # and the longest wait between two, however many failed in a row


@dataclass
class StuckAgent:
    """An agent whose work a failed write stopped, until an item of it gets through."""

    agent_id: str
    since_ms: int  # the first failure of this run of failures, unix ms
    error: str  # the latest
    failures: int  # in a row

    @property
    def retry_delay_s(self) -> float:
        return backoff_s(self.failures - 1, first_s=RESUME_FIRST_S, max_s=RESUME_MAX_S)

    def to_dict(self) -> dict[str, str | int]:
        return {"agentId": self.agent_id, "since": self.since_ms, "error": self.error,
                "failures": self.failures}  # fmt: skip


class StorageFull(OSError):
    """Nothing can be accepted for an agent until the disk takes writes again."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(
            errno.ENOSPC,
            f"the disk is full: agent {agent_id}'s work waits for space to be written",
        )


# Records read back beyond twice the context window, for a turn's tool calls and results.
CONTEXT_MARGIN = 256


class Residency:
    def __init__(
        self,
        runtime: AgentRuntime,
        directory: AgentDirectory,
        *,
        idle_unload_s: float,
        resumed: Callable[[Agent], None],
        stopping: Callable[[], bool],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.events = runtime.events
        self.directory = directory
        self.idle_unload_s = idle_unload_s
        self._resumed = resumed  # a suspended agent is back: run its items
        self._monotonic = monotonic
        self.loaded: dict[str, Agent] = {}
        self._loading: dict[str, asyncio.Future[Agent]] = {}
        # Items waiting for their agent to load: recovered at boot, or suspended.
        self.recovered: dict[str, list[InboxItem]] = {}
        self.restored: set[str] = set()
        # Agents whose turn a failed write stopped: unloaded, their items waiting in
        # ``recovered``, and a task that loads them again once the disk takes writes.
        self._suspended: dict[str, asyncio.Task[None]] = {}
        self.problems: dict[str, AgentProblem] = {}  # damaged files found while loading
        self.stuck: dict[str, StuckAgent] = {}
        self._unloads_unreleased = 0
        self._stopping = stopping  # the engine is shutting down: resume nothing

    def adopt(self, agent: Agent) -> None:
        """A new agent, made in memory: loaded and restored already."""
        self.loaded[agent.id] = agent
        self.restored.add(agent.id)

    # -- loading ------------------------------------------------------------------------

    async def wake(self, agent_id: str) -> Agent:
        agent = self.loaded.get(agent_id)
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
        entry = self.directory.entry(agent_id)
        if agent_id in self._suspended:
            # Its records the disk refused may still be queued for another try: read
            # its files only once they were written (or dropped), never before. A batch
            # in flight may fail again and queue them anew, so look once it has ended.
            if await self.store.has_backlog():
                raise StorageFull(agent_id)
            resumer = self._suspended.pop(agent_id)
            if resumer is not asyncio.current_task():
                resumer.cancel()  # a message woke it first
        first_load = agent_id not in self.restored
        # Unloading flushed this agent's appends; a torn tail can only come from a
        # crash, so the file is repaired on the first load after boot.
        state, history, problem = await self._read_agent(agent_id, first_load)
        if problem is not None:
            self.problems[agent_id] = problem
            self.events.emit(EventType.AGENT_DAMAGED, problem.to_dict())
        agent = Agent(agent_id, entry.descriptor, state, history, self.runtime)
        agent.last_active = self._monotonic()
        for item in self.recovered.pop(agent_id, []):
            progress = turn_progress(history.records, item.id)
            if progress.started or progress.done:
                agent.resume_from(item.id, progress)
            agent.remember(item.id)
            agent.inbox.push(item)
        self.loaded[agent_id] = agent
        if first_load:
            self.restored.add(agent_id)
            self.events.emit(EventType.AGENT_RESTORED, {"agentId": agent_id})
        else:
            self.events.emit(EventType.AGENT_WOKE, {"agentId": agent_id})
        return agent

    @property
    def context_records(self) -> int:
        """Context records read back at load when no marker comes first: the window
        is the last ``maxContextMessages`` messages from a user message, and a loaded
        context is kept up to twice that; the margin covers a turn's tool records."""
        return 2 * self.runtime.loop.limits.max_context_messages + CONTEXT_MARGIN

    async def _read_agent(
        self, agent_id: str, repair: bool
    ) -> tuple[AgentState, HistoryTail, AgentProblem | None]:
        problem = None
        stored = await self.store.read_agent(
            agent_id,
            repair=repair,
            context_records=self.context_records,
            message_ids=SEEN_IDS_LIMIT,
        )
        state, history = stored.state, stored.history
        if stored.damaged is not None:
            # The conversation goes on; its grants, which cannot be read, start from
            # nothing (the agent may ask again), and the state is kept for its owner.
            error = stored.damaged
            aside = await self.store.set_aside_state(agent_id)
            problem = AgentProblem(
                agent_id,
                error.where,
                str(error),
                f"started again with no permissions; the damaged file is kept as {aside}",
            )
            log.error(
                "%s; the agent %s",
                error,
                problem.action,
                extra={"action": "agents.state_damaged", "agentId": agent_id},
            )
        if state is None:
            now = self.runtime.now_ms()
            created = self.directory.entry(agent_id).created_at or now
            state = AgentState(createdAt=created, updatedAt=now)
        return state, history, problem

    # -- a write failed -----------------------------------------------------------------

    def suspend(self, agent: Agent, item: InboxItem, error: OSError) -> None:
        """A write failed in the middle of ``item``: stop this agent and try again later.

        The item was durably accepted, so it is not lost and must not be marked done.
        The agent leaves memory (what it holds may include records the disk refused)
        and is loaded again like after a crash: its history says how far the turn
        got, so a reply already written is delivered rather than generated twice.
        """
        reason = error.strerror or str(error)
        stuck = self.stuck.get(agent.id)
        if stuck is None:
            stuck = self.stuck[agent.id] = StuckAgent(agent.id, self.runtime.now_ms(), reason, 0)
        stuck.failures += 1
        stuck.error = reason
        log.error(
            "agent %s stopped: a write failed (%s, %d in a row); trying again in %g s",
            agent.id,
            reason,
            stuck.failures,
            stuck.retry_delay_s,
            extra={"action": "agent.storage_failed", "agentId": agent.id, "errno": error.errno},
        )
        waiting = [item]
        while (queued := agent.inbox.pop()) is not None:
            waiting.append(queued)
        agent.unloaded = True
        if self.loaded.get(agent.id) is agent:
            del self.loaded[agent.id]
        self.restored.discard(agent.id)  # the next load repairs its history first
        self.recovered[agent.id] = [*waiting, *self.recovered.get(agent.id, [])]
        if agent.id not in self._suspended:
            self._suspended[agent.id] = asyncio.create_task(
                self._resume_later(agent.id), name=f"agent-resume-{agent.id}"
            )
        self.events.emit(
            EventType.AGENT_STORAGE_FAILED,
            {"agentId": agent.id, "error": reason},
        )

    def got_through(self, agent_id: str) -> None:
        """An item of the agent ended: it is not stuck (any more)."""
        if self.stuck.pop(agent_id, None) is not None:
            log.info(
                "agent %s is writing again", agent_id,
                extra={"action": "agent.storage_recovered", "agentId": agent_id},
            )  # fmt: skip

    async def _resume_later(self, agent_id: str) -> None:
        stuck = self.stuck.get(agent_id)
        # The pause the failure's log line announced, then longer ones.
        failed_before = stuck.failures - 1 if stuck is not None else 0
        backoff = Backoff(RESUME_FIRST_S, RESUME_MAX_S, attempt=failed_before)
        while not self._stopping():
            await asyncio.sleep(backoff.next_s())
            try:
                agent = await self.wake(agent_id)
            except StorageFull:
                continue  # still full: later
            except Exception:
                log.exception(
                    "resuming an agent failed; trying again",
                    extra={"action": "agent.resume_failed", "agentId": agent_id},
                )
                continue
            self._resumed(agent)
            return

    def cancel_resumes(self) -> None:
        for task in self._suspended.values():
            task.cancel()

    # -- idle agents --------------------------------------------------------------------

    async def sweep_idle(self) -> None:
        interval = max(0.5, min(self.idle_unload_s / 2, 30.0))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.unload_idle()
            except OSError as exc:  # their states could not be written: they stay loaded
                log.error(
                    "idle agents not unloaded: %s", exc, extra={"action": "agents.unload_failed"}
                )
            await self.release_memory()

    async def unload_idle(self, *, older_than_s: float | None = None) -> int:
        threshold = self.idle_unload_s if older_than_s is None else older_than_s
        now = self._monotonic()
        idle = [
            agent
            for agent in self.loaded.values()
            if not agent.running and not len(agent.inbox) and now - agent.last_active >= threshold
        ]
        if not idle:
            return 0
        await self.store.flush()
        # Their states go to disk first, all in one batch, while they are still loaded:
        # a message arriving meanwhile finds the agent in memory, never a stale file.
        await self.store.write_states(
            {agent.id: agent.state.model_dump(mode="json") for agent in idle if agent.state_dirty}
        )
        count = 0
        for agent in idle:
            if agent.running or len(agent.inbox) or self.loaded.get(agent.id) is not agent:
                continue  # got work while the states were written: it stays
            agent.unloaded = True
            agent.state_dirty = False
            del self.loaded[agent.id]
            self.store.release(agent.id)
            self.directory.rested(agent.id, agent.state.updatedAt)
            self.events.emit(EventType.AGENT_SLEEP, {"agentId": agent.id, "reason": "idle"})
            count += 1
        self._unloads_unreleased += count
        return count

    async def release_memory(self) -> None:
        """Give what unloaded agents held back to the system, after many unloads and
        when the last loaded agent went (a load that ends would leave its memory behind
        otherwise, however few its final unloads were). Called with no unloaded agent
        still referenced, not even from a local variable."""
        if self._unloads_unreleased >= RELEASE_MEMORY_EVERY or (
            self._unloads_unreleased and not self.loaded
        ):
            self._unloads_unreleased = 0
            if not self.loaded:
                await self._checkpoint_at_rest()
            release_freed_memory()

    async def _checkpoint_at_rest(self) -> None:
        """Every agent went idle: checkpoint now rather than at the next interval. The
        writer keeps the path of each file the load appended to until a checkpoint
        syncs it; made while the load ran, those few thousand small objects would keep
        the allocator's arenas of the whole load from being returned. It also leaves a
        boot nothing to replay."""
        try:
            await self.runtime.inbox_log.checkpoint()
        except OSError as exc:  # a full disk: the periodic checkpoint tries again
            log.error("checkpoint failed: %s", exc, extra={"action": "agents.checkpoint_failed"})

    async def flush_states(self) -> None:
        """Every loaded agent's changed state, in one batch (two syncs, not two per agent)."""
        states = {}
        for agent in self.loaded.values():
            if agent.state_dirty:
                agent.state_dirty = False  # a change during the write sets it again
                states[agent.id] = agent.state.model_dump(mode="json")
        # Only ids are held across the write: an agent unloaded meanwhile is freed at once.
        try:
            await self.store.write_states(states)
        except OSError:
            for agent_id in states:
                if (loaded := self.loaded.get(agent_id)) is not None:
                    loaded.state_dirty = True  # written next time

    async def flush_states_periodically(self) -> None:
        while True:
            await asyncio.sleep(STATE_FLUSH_INTERVAL_S)
            await self.flush_states()

    def live_updated_at(self, agent_id: str) -> int | None:
        agent = self.loaded.get(agent_id)
        return agent.state.updatedAt if agent is not None else None
