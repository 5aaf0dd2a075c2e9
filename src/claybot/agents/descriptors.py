"""What an agent represents (seed 003), written once at creation.

A descriptor maps to one stable key, and a key to one agent id forever: the same
Telegram chat always reaches the same agent, across restarts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from claybot.tools.base import AgentKind

# Ids and names travel into file paths and keys: keep them printable and bounded.
_NAME = Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f/]+$")


class _Descriptor(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UserDescriptor(_Descriptor):
    type: Literal["user"] = "user"
    connector: str = _NAME
    userId: str = _NAME
    channelId: str = _NAME


class CronDescriptor(_Descriptor):
    type: Literal["cron"] = "cron"
    id: str = _NAME


class HeartbeatDescriptor(_Descriptor):
    type: Literal["heartbeat"] = "heartbeat"


class SubagentDescriptor(_Descriptor):
    type: Literal["subagent"] = "subagent"
    id: str = _NAME
    parentAgentId: str = _NAME
    name: str = _NAME


AgentDescriptor = Annotated[
    UserDescriptor | CronDescriptor | HeartbeatDescriptor | SubagentDescriptor,
    Field(discriminator="type"),
]
DESCRIPTOR_ADAPTER: TypeAdapter[AgentDescriptor] = TypeAdapter(AgentDescriptor)

FetchStrategy = Literal["most-recent-foreground", "heartbeat"]
FETCH_STRATEGIES: tuple[FetchStrategy, ...] = ("most-recent-foreground", "heartbeat")


def parse_descriptor(data: Any) -> AgentDescriptor:
    return DESCRIPTOR_ADAPTER.validate_python(data)


def descriptor_to_dict(descriptor: AgentDescriptor) -> dict[str, Any]:
    """A dict: it is written verbatim to descriptor.json, the index and history records,
    and shown as is, so its fields are the descriptor model's own, whatever its type."""
    return descriptor.model_dump()


def user_key(connector: str, user_id: str, channel_id: str) -> str:
    """The routing key of a user agent. Names hold no ``/`` (see ``_NAME``), so the key of
    one conversation is never that of another."""
    return f"/connectors/{connector}/{user_id}/{channel_id}"


def descriptor_key(descriptor: AgentDescriptor) -> str:
    """The routing key: one key, one agent id, forever."""
    match descriptor:
        case UserDescriptor():
            return user_key(descriptor.connector, descriptor.userId, descriptor.channelId)
        case CronDescriptor():
            return f"/cron/{descriptor.id}"
        case HeartbeatDescriptor():
            return "/heartbeat"
        case SubagentDescriptor():
            return f"/subagent/{descriptor.id}"


def agent_kind(descriptor: AgentDescriptor) -> AgentKind:
    return descriptor.type


def is_foreground(descriptor: AgentDescriptor) -> bool:
    """Only user agents are foreground (seed 003)."""
    return isinstance(descriptor, UserDescriptor)


def descriptor_label(descriptor: AgentDescriptor) -> str:
    match descriptor:
        case UserDescriptor():
            return f"{descriptor.connector}:{descriptor.userId}/{descriptor.channelId}"
        case CronDescriptor():
            return f"cron:{descriptor.id}"
        case HeartbeatDescriptor():
            return "heartbeat"
        case SubagentDescriptor():
            return f"subagent:{descriptor.name}"
