"""Where agents' permission requests meet people.

The broker (``claybot.permissions.requests``) keeps requests and their deadlines;
this desk knows the agents and the connectors: it routes a request to a user (the
asker's own conversation, else the most recent one), shows the prompt through
that conversation's connector, updates it once decided, and hands the decision
to the asking agent through its durable inbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from claybot.agents.descriptors import SubagentDescriptor, UserDescriptor, descriptor_label
from claybot.agents.system import AgentNotFound, AgentSystem
from claybot.connectors.base import OutgoingMessage, PermissionPrompter
from claybot.connectors.outbox import Connectors
from claybot.kernel.events import EventBus
from claybot.permissions.requests import Conversation, PermissionBroker, PermissionRequest

log = logging.getLogger(__name__)


class PermissionDesk:
    def __init__(
        self,
        agents: AgentSystem,
        connectors: Connectors,
        *,
        path: Path,
        events: EventBus,
        now_ms: Callable[[], int],
        timeout_s: float,
    ) -> None:
        self._agents = agents
        self._connectors = connectors
        self.broker = PermissionBroker(
            path,
            events=events,
            now_ms=now_ms,
            timeout_s=timeout_s,
            present=self._present,
            withdraw=self._withdraw,
            deliver=self._deliver,
        )

    async def ask(self, agent_id: str, permission: str, reason: str) -> PermissionRequest:
        """Route a request to a user: the asker's own conversation, else the most recent one."""
        agents = self._agents
        descriptor = agents.descriptor_of(agent_id)
        if isinstance(descriptor, UserDescriptor):
            where, label = descriptor, descriptor_label(descriptor)
        else:
            foreground = agents.listings.most_recent("most-recent-foreground")
            if foreground is None:
                raise ValueError("No user has talked to the engine yet, so nobody can be asked.")
            found = agents.descriptor_of(foreground)
            assert isinstance(found, UserDescriptor)
            where = found
            label = (
                f'background agent "{descriptor.name}" ({agent_id})'
                if isinstance(descriptor, SubagentDescriptor)
                else f"{descriptor_label(descriptor)} ({agent_id})"
            )
        return await self.broker.request(
            agent_id=agent_id,
            agent_label=label,
            permission=permission,
            reason=reason,
            where=Conversation(where.connector, where.userId, where.channelId),
        )

    async def _present(self, request: PermissionRequest) -> None:
        """Show the prompt through its connector; the local and web chats follow the events."""
        connector = self._connectors.get(request.connector)
        if connector is None:
            return
        if isinstance(connector, PermissionPrompter):
            await connector.request_permission(request.prompt())
            return
        text = (
            f"{request.prompt().text()}\n"
            f"Answer with `claybot permissions allow {request.id}` (or deny)."
        )
        await connector.send(
            OutgoingMessage(
                f"perm:{request.id}",
                request.agent_id,
                request.connector,
                request.user_id,
                request.channel_id,
                text,
            )
        )

    async def _withdraw(self, request: PermissionRequest) -> None:
        connector = self._connectors.get(request.connector)
        if isinstance(connector, PermissionPrompter):
            await connector.permission_decided(request.prompt(), request.outcome())

    async def _deliver(self, request: PermissionRequest) -> None:
        """The decision goes to the asking agent by id, through its durable inbox."""
        try:
            await self._agents.submit(
                request.agent_id,
                request.decision_text(),
                message_id=f"perm:{request.id}",
                origin="permissions",
                context={
                    "grant": {
                        "requestId": request.id,
                        "permission": request.permission,
                        "approved": request.approved,
                    }
                },
            )
        except AgentNotFound:
            log.warning(
                "the agent of a decided permission request is gone",
                extra={"action": "permission.orphan", "requestId": request.id},
            )
