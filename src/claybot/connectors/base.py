"""The connector contract.

A connector turns platform updates into ``InboundMessage`` (posted through the
engine, which makes them durable before returning) and delivers
``OutgoingMessage`` back. Outgoing messages carry stable ids derived from the
inbound message id, so a connector (or its client) can drop a repeat after a
restart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from claybot.files.reference import FileReference
from claybot.kernel.event_types import OutgoingMessagePayload
from claybot.permissions.prompts import (
    PermissionOutcome,
    PermissionPrompt,
)


@dataclass(frozen=True)
class InboundMessage:
    connector: str  # the connector's instance id
    user_id: str
    channel_id: str
    text: str
    message_id: str | None = None  # platform or client id: a repeat with it is accepted once
    metadata: dict[str, Any] | None = None
    files: tuple[FileReference, ...] = ()  # stored already (``FileStore.put``)


@dataclass(frozen=True)
class PostedMessage:
    agent_id: str
    message_id: str
    duplicate: bool  # the same message id was accepted before; nothing new was queued


@dataclass(frozen=True)
class OutgoingMessage:
    id: str
    agent_id: str
    connector: str
    user_id: str
    channel_id: str
    text: str
    in_reply_to: str | None = None
    final: bool = True  # the last message of its turn: the agent is done with in_reply_to
    # Files sent with it (the send_file tool's): a connector delivers each, ``text`` as
    # their caption.
    files: tuple[FileReference, ...] = ()

    def to_dict(self) -> OutgoingMessagePayload:
        """The message as its ``agent.outgoing`` event and the outbox carry it."""
        data: OutgoingMessagePayload = {
            "id": self.id,
            "agentId": self.agent_id,
            "connector": self.connector,
            "userId": self.user_id,
            "channelId": self.channel_id,
            "text": self.text,
            "inReplyTo": self.in_reply_to,
            "final": self.final,
        }
        if self.files:
            data["files"] = [file.to_dict() for file in self.files]
        return data


PostInbound = Callable[[InboundMessage], Awaitable[PostedMessage]]


@runtime_checkable
class PermissionPrompter(Protocol):
    """Optional connector capability: an approval UI (buttons, a prompt).

    A connector without it gets the prompt as a plain text message.
    """

    async def request_permission(self, prompt: PermissionPrompt) -> None: ...

    async def permission_decided(
        self, prompt: PermissionPrompt, outcome: PermissionOutcome
    ) -> None:
        """The request was decided (here, elsewhere, or by the timeout): update the UI."""
        ...


class ConversationControl(Protocol):
    """What a connector may ask of the engine besides posting messages.

    Slash commands are the connector's business (seed 001): it maps ``/reset``
    to ``reset_conversation`` and ``/stop`` to ``stop_conversation``; the engine never parses them.
    """

    async def reset_conversation(
        self, connector: str, user_id: str, channel_id: str, command_id: str | None = None
    ) -> bool:
        """Clear the conversation's context; False if it has no agent yet.

        ``command_id`` is the connector's id for this ``/reset`` (like a message id):
        the same command delivered again resets nothing a second time.
        """
        ...

    async def stop_conversation(self, connector: str, user_id: str, channel_id: str) -> bool:
        """Abort the running turn; False if nothing was running."""
        ...

    async def decide_permission(
        self, connector: str, request_id: str, approved: bool
    ) -> PermissionOutcome:
        """Decide a request shown through ``connector``.

        Raises ``LookupError`` for an unknown request (or one shown elsewhere)
        and ``PermissionAlreadyDecided`` when it was decided before.
        """
        ...


@runtime_checkable
class Connector(Protocol):
    @property
    def id(self) -> str: ...

    async def send(self, message: OutgoingMessage) -> None: ...

    async def stop(self) -> None: ...
