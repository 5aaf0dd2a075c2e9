"""Background agents (subagents): starting one within the limits (how deep they may
nest, how many may work at once), and reporting each of its turns to its parent."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from claybot.agents.admission import Admissions
from claybot.agents.agent import Agent
from claybot.agents.descriptors import SubagentDescriptor
from claybot.agents.directory import AgentDirectory, AgentNotFound
from claybot.agents.inbox import InboxItem
from claybot.agents.residency import Residency
from claybot.agents.turn import TurnOutcome
from claybot.kernel.errors import Conflict
from claybot.kernel.event_types import EventType
from claybot.kernel.ids import IdFactory
from claybot.permissions.model import Permissions

log = logging.getLogger(__name__)


class SubagentLimit(Conflict, ValueError):
    """Starting another background agent would pass a nesting or children limit."""

    code = "subagent_limit"


@dataclass(frozen=True)
class SubagentLimits:
    max_depth: int = 3  # a user agent's subagent is depth 1
    max_busy_children: int = 8  # children with unfinished work, per parent

    def check(self, depth: int, busy_children: int) -> None:
        """Raise ``SubagentLimit``, in words the model can act on, if one is passed."""
        if depth > self.max_depth:
            raise SubagentLimit(
                f"background agents may nest {self.max_depth} deep; this one would be "
                f"at depth {depth}. Do the work here or report back to your parent instead."
            )
        if busy_children >= self.max_busy_children:
            raise SubagentLimit(
                f"this agent already has {busy_children} background agents at work (the "
                f"limit is {self.max_busy_children}); wait for one to report back first."
            )


def result_notice(name: str, agent_id: str, outcome: TurnOutcome) -> str:
    """What the parent reads when a subagent's turn ends."""
    who = f'Background agent "{name}" ({agent_id})'
    if outcome.failed:
        return f"{who} failed: {outcome.text}"
    return f"{who} finished:\n{outcome.text or '(no answer)'}"


class Subagents:
    def __init__(
        self,
        limits: SubagentLimits,
        directory: AgentDirectory,
        residency: Residency,
        admissions: Admissions,
        new_id: IdFactory,
    ) -> None:
        self.limits = limits
        self._directory = directory
        self._residency = residency
        self._admissions = admissions
        self._new_id = new_id

    def busy_children(self, parent_id: str) -> int:
        count = 0
        for agent_id in self._directory.children_of(parent_id):
            agent = self._residency.loaded.get(agent_id)
            if (agent is not None and agent.busy) or agent_id in self._residency.recovered:
                count += 1
        return count

    async def start(
        self, parent_id: str, name: str, prompt: str, *, permissions: Permissions | None = None
    ) -> str:
        """Create a new background agent (a new id every time) and post its first message."""
        if parent_id not in self._directory:
            raise AgentNotFound(parent_id)
        self.limits.check(self._directory.depth_of(parent_id) + 1, self.busy_children(parent_id))
        agent_id = self._new_id()
        descriptor = SubagentDescriptor(id=agent_id, parentAgentId=parent_id, name=name)
        await self._admissions.create(
            descriptor,
            agent_id=agent_id,
            permissions=permissions,
            first_message=(prompt, parent_id),
        )
        return agent_id

    async def report(self, agent: Agent, item: InboxItem, outcome: TurnOutcome) -> None:
        """A subagent's turn ended: its parent gets the result, or one failure notice.

        Durable before the item is marked done, and its message id is derived from
        the subagent's item, so a restart that resumes this turn posts it again and
        the parent's inbox drops the repeat.
        """
        descriptor = agent.descriptor
        assert isinstance(descriptor, SubagentDescriptor)
        parent_id = descriptor.parentAgentId
        if parent_id not in self._directory:
            log.warning(
                "a subagent's parent is gone; its result is dropped",
                extra={"action": "subagent.orphan", "agentId": agent.id, "parentId": parent_id},
            )
            return
        text = result_notice(descriptor.name, agent.id, outcome)
        result_id = f"{agent.id}:{item.id}:result"
        context = {"origin": agent.id}
        await self._admissions.accept([(parent_id, "message", result_id, text, context)])
        agent.runtime.events.emit(
            EventType.SUBAGENT_FAILED if outcome.failed else EventType.SUBAGENT_FINISHED,
            {"agentId": agent.id, "parentAgentId": parent_id, "messageId": item.id},
        )
