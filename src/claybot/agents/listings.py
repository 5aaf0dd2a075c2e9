"""What the runtime shows of its agents: listings, counts and damage, read-only.

The API, the dashboard, the status and the agents' own tools read agents through
``AgentSystem.listings``: built from the directory (every agent) and the residency
(those in memory), and only for subagents' listing from their stored states.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from claybot.agents.descriptors import (
    FetchStrategy,
    SubagentDescriptor,
    UserDescriptor,
    descriptor_label,
    descriptor_to_dict,
)
from claybot.agents.directory import AgentDirectory
from claybot.agents.durable_port import AgentStore, InboxStore, IndexEntry
from claybot.agents.residency import Residency
from claybot.tools.base import AgentKind

Lifecycle = Literal["active", "sleeping"]  # in memory, or on disk only


class AgentListing(TypedDict):
    """An agent as the API lists it (``wire.agents.AgentListing``), in the answer's order."""

    agentId: str
    descriptor: dict[str, Any]  # ``descriptor_to_dict``
    type: AgentKind
    label: str
    createdAt: int  # unix ms
    updatedAt: int  # unix ms
    lifecycle: Lifecycle
    pending: int  # items waiting in its inbox (0 when sleeping)
    problem: NotRequired[dict[str, str]]  # ``AgentProblem.to_dict``
    stuck: NotRequired[dict[str, str | int]]  # ``StuckAgent.to_dict``


class BackgroundAgent(TypedDict):
    """A subagent as stored (``wire.agents.BackgroundAgent``)."""

    agentId: str
    name: str
    parentAgentId: str
    createdAt: int
    updatedAt: int
    status: Literal["idle"]
    lifecycle: Lifecycle
    pending: Literal[0]


class AgentListings:
    def __init__(
        self,
        directory: AgentDirectory,
        residency: Residency,
        store: AgentStore,
        inbox: InboxStore,
    ) -> None:
        self._directory = directory
        self._residency = residency
        self._store = store
        self._inbox = inbox

    def agents(self) -> list[AgentListing]:
        """Every agent (as ``agent`` lists it), most recently active first."""
        result = [self.agent(entry.agent_id) for entry in self._directory]
        result.sort(key=lambda item: item["updatedAt"], reverse=True)
        return result

    def agent(self, agent_id: str) -> AgentListing:
        """One agent: its entry, how recent it is, whether it is in memory, its damage."""
        residency = self._residency
        agent = residency.loaded.get(agent_id)
        entry = self._directory.entry(agent_id)
        descriptor = entry.descriptor
        listed: AgentListing = {
            "agentId": agent_id,
            "descriptor": descriptor_to_dict(descriptor),
            "type": descriptor.type,
            "label": descriptor_label(descriptor),
            "createdAt": entry.created_at,
            "updatedAt": self._directory.updated_at(agent_id, residency.live_updated_at(agent_id)),
            "lifecycle": "active" if agent is not None else "sleeping",
            "pending": len(agent.inbox) if agent is not None else 0,
        }
        if agent_id in residency.problems:
            listed["problem"] = residency.problems[agent_id].to_dict()
        if agent_id in residency.stuck:
            listed["stuck"] = residency.stuck[agent_id].to_dict()
        return listed

    def page(
        self, *, kind: str | None, text: str | None, offset: int, limit: int
    ) -> tuple[list[AgentListing], int]:
        """A page of agents, most recently active first, of one ``kind`` and holding
        ``text`` in their id or name if given, and how many match: filtered and sorted on
        the directory's entries, with a listing built only for the rows returned (at
        10,000 agents, building every listing took 20-30 ms)."""
        residency = self._residency
        directory = self._directory
        needle = text.casefold() if text else None
        matching: list[tuple[int, str]] = []
        for entry in directory:
            agent_id = entry.agent_id
            if kind is not None and entry.descriptor.type != kind:
                continue
            if (
                needle is not None
                and needle not in agent_id.casefold()
                and needle not in descriptor_label(entry.descriptor).casefold()
            ):
                continue
            updated = directory.updated_at(agent_id, residency.live_updated_at(agent_id))
            matching.append((updated, agent_id))
        matching.sort(key=lambda pair: pair[0], reverse=True)  # ties: directory order
        chosen = matching[offset : offset + limit]
        return [self.agent(agent_id) for _, agent_id in chosen], len(matching)

    async def background(self) -> list[BackgroundAgent]:
        """Subagents as stored (no live inbox status, seed 000), each with its
        ``lifecycle`` (in memory or not) and, as seed 000 has it, ``pending`` 0."""
        entries = [
            entry for entry in self._directory if isinstance(entry.descriptor, SubagentDescriptor)
        ]
        # A damaged state lists from its descriptor; the damage is in ``problems``.
        states = await self._store.read_states([entry.agent_id for entry in entries])
        loaded = self._residency.loaded
        result: list[BackgroundAgent] = []
        for entry in entries:
            descriptor = entry.descriptor
            assert isinstance(descriptor, SubagentDescriptor)
            state = states.get(entry.agent_id)
            result.append(
                {
                    "agentId": entry.agent_id,
                    "name": descriptor.name,
                    "parentAgentId": descriptor.parentAgentId,
                    "createdAt": state.createdAt if state else entry.created_at,
                    "updatedAt": state.updatedAt if state else entry.created_at,
                    "status": "idle",
                    "lifecycle": "active" if entry.agent_id in loaded else "sleeping",
                    "pending": 0,
                }
            )
        return result

    def conversations(self, connector: str) -> list[IndexEntry]:
        """The user agents of one connector, oldest first: from memory, no store read."""
        return [
            entry
            for entry in self._directory
            if isinstance(entry.descriptor, UserDescriptor)
            and entry.descriptor.connector == connector
        ]

    def most_recent(self, strategy: FetchStrategy) -> str | None:
        """Seed 003: the most recent user agent, or the most recent heartbeat agent."""
        return self._directory.most_recent(strategy, self._residency.live_updated_at)

    def counts_by_kind(self) -> dict[str, int]:
        """How many agents there are of each descriptor type (user, subagent, ...)."""
        counts: dict[str, int] = {}
        for entry in self._directory:
            kind = entry.descriptor.type
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def turn_counts(self) -> tuple[int, int]:
        """Turns running now, and items accepted that wait for their turn."""
        running = sum(1 for agent in self._residency.loaded.values() if agent.running)
        return running, max(0, self._inbox.pending_count - running)

    def problems(self) -> list[dict[str, str]]:
        """Damaged agent files: those that could not be routed at boot, and those found
        while loading (a state that did not validate)."""
        found = [*self._store.unroutable, *self._residency.problems.values()]
        return [problem.to_dict() for problem in found]

    def stuck(self) -> list[dict[str, str | int]]:
        """Agents whose work a failed write stopped: they try again, ever more slowly,
        until an item gets through."""
        return [stuck.to_dict() for stuck in self._residency.stuck.values()]
