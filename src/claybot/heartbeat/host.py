"""The heartbeat scheduler's host over the agent runtime.

A beat is a turn of the one heartbeat agent; a reply that needs attention is
passed on to the most recent user conversation.
"""

from __future__ import annotations

import logging

from claybot.agents.descriptors import HeartbeatDescriptor
from claybot.agents.system import AgentSystem
from claybot.cron.host import gate_grant
from claybot.scheduling.gate import GateGrant

log = logging.getLogger(__name__)


class AgentHeartbeatHost:
    """``HeartbeatHost`` for the engine."""

    def __init__(self, agents: AgentSystem) -> None:
        self._agents = agents

    async def post_beat(self, message_id: str, text: str) -> tuple[str, str]:
        agent_id = await self._agents.resolve(HeartbeatDescriptor())
        turn = await self._agents.submit(agent_id, text, message_id=message_id, origin="heartbeat")
        return turn.agent_id, turn.id

    async def wait_beat(self, agent_id: str, item_id: str) -> str | None:
        outcome = await self._agents.turn(agent_id, item_id).outcome()
        return None if outcome.failed else outcome.text or None

    async def forward_beat(self, message_id: str, text: str) -> None:
        target = self._agents.listings.most_recent("most-recent-foreground")
        if target is None:
            log.info("no user to tell about the heartbeat", extra={"action": "heartbeat.unheard"})
            return
        await self._agents.submit(
            target,
            f"Heartbeat report:\n{text}",
            message_id=f"{message_id}:report",
            origin="heartbeat",
        )

    async def gate_grant(self, made_by: str | None, folder: str) -> GateGrant:
        return await gate_grant(self._agents, made_by, folder)
