"""The directory of agents: every agent id, its descriptor, and how recent it is.

Built from ``agents/index.jsonl`` at boot and kept in memory for the engine's
life (an agent at rest costs only its entry here). A descriptor maps to one
agent id forever (``descriptor_key``). Recency answers seed 003's fetch
strategies ("the most recent user agent") without reading any agent's files.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from typing import TypedDict

from claybot.agents.descriptors import (
    AgentDescriptor,
    FetchStrategy,
    HeartbeatDescriptor,
    SubagentDescriptor,
    UserDescriptor,
    descriptor_key,
    descriptor_label,
)
from claybot.agents.durable_port import AgentStore, IndexEntry
from claybot.kernel.errors import NotFound


class AgentNotFound(NotFound, LookupError):
    code = "agent_not_found"

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no agent with id {agent_id!r}", field="agentId")
        self.agent_id = agent_id


UNKNOWN = -(2**63)  # an updatedAt not looked up yet


class SubagentNode(TypedDict):
    """A subagent in the tree below an agent, with its own below it."""

    agentId: str
    label: str
    children: list[SubagentNode]


class AgentDirectory:
    def __init__(self, store: AgentStore) -> None:
        self._store = store
        self._entries: dict[str, IndexEntry] = {}
        self._by_key: dict[str, str] = {}
        # Each parent's subagents, oldest first (entries are never removed).
        self._children: dict[str, list[str]] = {}
        # Recency, by the agent's slot: raw integers in arrays, because an int object
        # stored per agent on every unload outlives the load that made it and keeps
        # that load's memory from going back to the system (see packed_context.py).
        self._slots: dict[str, int] = {}
        self._updated = array("q")  # last known updatedAt of agents at rest; UNKNOWN
        # Recency of foreground activity since boot (milliseconds tie too easily); 0: none.
        self._touched = array("q")
        self._touch_seq = 0

    def add(self, entry: IndexEntry) -> None:
        descriptor = entry.descriptor
        if entry.agent_id not in self._entries and isinstance(descriptor, SubagentDescriptor):
            self._children.setdefault(descriptor.parentAgentId, []).append(entry.agent_id)
        self._entries[entry.agent_id] = entry
        self._by_key[descriptor_key(entry.descriptor)] = entry.agent_id
        if entry.agent_id not in self._slots:
            self._slots[entry.agent_id] = len(self._updated)
            self._updated.append(UNKNOWN)
            self._touched.append(0)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[IndexEntry]:
        return iter(self._entries.values())

    def entry(self, agent_id: str) -> IndexEntry:
        entry = self._entries.get(agent_id)
        if entry is None:
            raise AgentNotFound(agent_id)
        return entry

    def id_for(self, descriptor: AgentDescriptor) -> str | None:
        """The agent id a descriptor maps to, if it has one yet."""
        return self._by_key.get(descriptor_key(descriptor))

    def id_for_key(self, key: str) -> str | None:
        """The agent id of a routing key (``descriptor_key``), if it has one yet."""
        return self._by_key.get(key)

    # -- recency ----------------------------------------------------------------------

    def touch(self, agent_id: str) -> None:
        """Foreground activity now (a user's message)."""
        self._touch_seq += 1
        self._touched[self._slots[agent_id]] = self._touch_seq

    def rested(self, agent_id: str, updated_at: int) -> None:
        """The agent left memory; this was its last ``updatedAt``."""
        self._updated[self._slots[agent_id]] = updated_at

    def updated_at(self, agent_id: str, live: int | None = None) -> int:
        """``live`` is a loaded agent's own ``updatedAt``; otherwise the last known one."""
        if live is not None:
            return live
        slot = self._slots[agent_id]
        known = self._updated[slot]
        if known == UNKNOWN:
            # Not touched since boot: the last history append is its last activity.
            known = self._updated[slot] = self._store.history_updated_ms(agent_id)
        return known

    def most_recent(self, strategy: FetchStrategy, live: Callable[[str], int | None]) -> str | None:
        """Seed 003: the most recent user agent, or the most recent heartbeat agent."""
        wanted: type[UserDescriptor] | type[HeartbeatDescriptor]
        wanted = UserDescriptor if strategy == "most-recent-foreground" else HeartbeatDescriptor
        best: tuple[int, int, str] | None = None
        for agent_id, entry in self._entries.items():
            if isinstance(entry.descriptor, wanted):
                touched = self._touched[self._slots[agent_id]]
                # Anything touched since boot is more recent than anything that was not.
                candidate = (
                    (1, touched, agent_id)
                    if touched
                    else (0, self.updated_at(agent_id, live(agent_id)), agent_id)
                )
                if best is None or candidate > best:
                    best = candidate
        return best[2] if best else None

    # -- the subagent tree ------------------------------------------------------------

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

    def children_of(self, parent_id: str) -> Iterator[str]:
        return iter(self._children.get(parent_id, ()))

    def subagent_tree(self, root_id: str, limit: int) -> tuple[list[SubagentNode], int]:
        """The subagents below ``root_id``, each with its own (``children``), oldest first,
        and how many there are in all; at most ``limit`` are given."""
        children = self._children
        given = 0
        total = 0
        seen = {root_id}

        def below(parent_id: str) -> list[SubagentNode]:
            nonlocal given, total
            nodes: list[SubagentNode] = []
            for child_id in children.get(parent_id, ()):
                if child_id in seen:  # a cycle can only come from hand-edited files
                    continue
                seen.add(child_id)
                total += 1
                if given >= limit:
                    below(child_id)  # counted, not given
                    continue
                given += 1
                descriptor = self._entries[child_id].descriptor
                nodes.append(
                    {
                        "agentId": child_id,
                        "label": descriptor_label(descriptor),
                        "children": below(child_id),
                    }
                )
            return nodes

        return below(root_id), total
