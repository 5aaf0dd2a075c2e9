"""The webchat connector's conversations, as the dashboard's Chat page reads them:
which there are, a conversation's agent and its pending permission prompts. (The
feed of a conversation's events is ``engine/feeds.py``'s ``ConversationFeed``.)

A conversation is a (user, channel) pair of the ``webchat`` connector; its agent is
the user agent the connector reaches (none until its first message).
"""

from __future__ import annotations

from dataclasses import dataclass

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.system import AgentSystem
from claybot.connectors.webchat import WEBCHAT_CONNECTOR
from claybot.kernel.event_types import PermissionRequest as PermissionRequestJson
from claybot.permissions.requests import PermissionBroker


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation as a list shows it."""

    userId: str
    channelId: str
    agentId: str
    updatedAt: int
    lifecycle: str


class WebchatConversations:
    def __init__(self, agents: AgentSystem, permissions: PermissionBroker) -> None:
        self._agents = agents
        self._permissions = permissions

    def listing(self) -> list[ConversationSummary]:
        """Every conversation, the most recently updated first."""
        listings = self._agents.listings
        found: list[ConversationSummary] = []
        for entry in listings.conversations(WEBCHAT_CONNECTOR):
            descriptor = entry.descriptor
            assert isinstance(descriptor, UserDescriptor)
            listing = listings.agent(entry.agent_id)
            found.append(
                ConversationSummary(
                    userId=descriptor.userId,
                    channelId=descriptor.channelId,
                    agentId=entry.agent_id,
                    updatedAt=listing["updatedAt"],
                    lifecycle=listing["lifecycle"],
                )
            )
        found.sort(key=lambda item: item.updatedAt, reverse=True)
        return found

    def agent_id(self, user_id: str, channel_id: str) -> str | None:
        """The conversation's agent (None until its first message)."""
        return self._agents.agent_id_for(_descriptor(user_id, channel_id))

    def pending_prompts(self, user_id: str, channel_id: str) -> list[PermissionRequestJson]:
        """The permission prompts that wait for an answer in this conversation."""
        return [
            item.to_dict()
            for item in self._permissions.list("pending")
            if item.connector == WEBCHAT_CONNECTOR
            and item.user_id == user_id
            and item.channel_id == channel_id
        ]


def _descriptor(user_id: str, channel_id: str) -> UserDescriptor:
    return UserDescriptor(connector=WEBCHAT_CONNECTOR, userId=user_id, channelId=channel_id)
