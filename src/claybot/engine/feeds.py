"""The event feeds the doors stream over SSE: the engine's, and one webchat conversation's.

A feed is an init frame (a snapshot the client starts from), a subscription to the
bus at the position the client resumes from, and for a conversation the test that
keeps only its frames. The door turns a feed into a stream; what goes in the
snapshot and which frames belong to a conversation is decided here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.system import AgentSystem
from claybot.connectors.webchat import LIVE_EVENTS, WEBCHAT_CONNECTOR, conversation_event
from claybot.cron.scheduler import CronScheduler
from claybot.engine.status import StatusReport
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.kernel.events import EventBus, Subscription, frame_event
from claybot.permissions.requests import PermissionBroker

__all__ = ["ConversationFeed", "EngineFeed", "Feed"]

WEBCHAT_MARK = f'"{WEBCHAT_CONNECTOR}"'.encode()
LIVE_MARKS = tuple(f'"{kind}"'.encode() for kind in LIVE_EVENTS)


@dataclass(frozen=True)
class Feed:
    # The init frame is an event as the stream writes it ({id, type, payload, ...}):
    # a dict, encoded verbatim like every other frame of the bus.
    init: dict[str, Any]
    subscription: Subscription
    keep: Callable[[bytes], bool] | None = None


class EngineFeed:
    """``GET /v1/engine/events``: the engine's state, then every event after it."""

    def __init__(
        self,
        events: EventBus,
        status: Callable[[], StatusReport],
        agents: AgentSystem,
        cron: CronScheduler,
        heartbeat: HeartbeatScheduler,
    ) -> None:
        self._events = events
        self._status = status
        self._agents = agents
        self._cron = cron
        self._heartbeat = heartbeat

    async def open(self, after: int | None) -> Feed:
        """The events after event ``after`` (all still buffered when None), opened by an
        init frame with the status, the schedules and the background agents."""
        events = self._events
        subscription = events.subscribe(after)
        init = {
            "id": events.last_id,
            "type": "init",
            "payload": {
                "status": self._status(),
                "cron": self._cron.listing(),
                "heartbeat": (await self._heartbeat.listing())["tasks"],
                "backgroundAgents": await self._agents.listings.background(),
                "replayed": subscription.replayed,
                "gap": subscription.gap,
            },
            "timestamp": None,
        }
        return Feed(init, subscription)


class ConversationFeed:
    """One webchat conversation's events: what ``/v1/engine/webchat/events`` and the
    dashboard's Chat page follow."""

    def __init__(
        self, events: EventBus, agents: AgentSystem, permissions: PermissionBroker
    ) -> None:
        self._events = events
        self._agents = agents
        self._permissions = permissions

    def open(self, user_id: str, channel_id: str, after: int | None) -> Feed:
        """The conversation's events after event ``after`` (all still buffered when
        None), opened by an init frame that lists its pending permission prompts."""
        events = self._events
        agents = self._agents
        subscription = events.subscribe(after)
        pending = [
            item.to_dict()
            for item in self._permissions.list("pending")
            if item.connector == WEBCHAT_CONNECTOR
            and item.user_id == user_id
            and item.channel_id == channel_id
        ]
        init = {"id": events.last_id, "type": "init", "payload": {"pendingPermissions": pending}}

        descriptor = UserDescriptor(
            connector=WEBCHAT_CONNECTOR, userId=user_id, channelId=channel_id
        )
        agent_id = agents.agent_id_for(descriptor)  # None until the first message

        def in_conversation(frame: bytes) -> bool:
            # Only a frame that names the webchat connector, or a live event (which names
            # the agent only), can belong here: the rest of the bus is skipped undecoded.
            nonlocal agent_id
            if WEBCHAT_MARK in frame:
                return conversation_event(frame_event(frame).to_dict(), user_id, channel_id)
            if not any(mark in frame for mark in LIVE_MARKS):
                return False
            agent_id = agent_id or agents.agent_id_for(descriptor)
            if agent_id is None or agent_id.encode() not in frame:
                return False
            return conversation_event(frame_event(frame).to_dict(), user_id, channel_id, agent_id)

        return Feed(init, subscription, in_conversation)
