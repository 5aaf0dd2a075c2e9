"""What a connector may ask of the agents besides posting messages (``ConversationControl``)."""

from __future__ import annotations

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.system import AgentSystem
from claybot.permissions.prompts import PermissionOutcome
from claybot.permissions.requests import PermissionBroker


class AgentConversationControl:
    """Made with the engine (plugins get it when they load), bound to the agents once they
    run; asked before that, it says the engine is not started."""

    def __init__(self) -> None:
        self._bound: tuple[AgentSystem, PermissionBroker] | None = None

    def bind(self, agents: AgentSystem, permissions: PermissionBroker) -> None:
        self._bound = (agents, permissions)

    @property
    def _agents(self) -> AgentSystem:
        return self._parts[0]

    @property
    def _permissions(self) -> PermissionBroker:
        return self._parts[1]

    @property
    def _parts(self) -> tuple[AgentSystem, PermissionBroker]:
        if self._bound is None:
            raise RuntimeError("the engine is not started")
        return self._bound

    def _agent_of(self, connector: str, user_id: str, channel_id: str) -> str | None:
        descriptor = UserDescriptor(connector=connector, userId=user_id, channelId=channel_id)
        return self._agents.agent_id_for(descriptor)

    async def reset_conversation(
        self, connector: str, user_id: str, channel_id: str, command_id: str | None = None
    ) -> bool:
        agent_id = self._agent_of(connector, user_id, channel_id)
        if agent_id is None:
            return False
        await self._agents.reset(agent_id, item_id=command_id)
        return True

    async def stop_conversation(self, connector: str, user_id: str, channel_id: str) -> bool:
        agent_id = self._agent_of(connector, user_id, channel_id)
        return agent_id is not None and self._agents.abort(agent_id)

    async def decide_permission(
        self, connector: str, request_id: str, approved: bool
    ) -> PermissionOutcome:
        request = await self._permissions.decide(
            request_id, approved, f"user:{connector}", connector=connector
        )
        return request.outcome()
