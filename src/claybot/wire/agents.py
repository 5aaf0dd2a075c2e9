"""Engine agents: the listing, background agents, posting a message, resetting."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from claybot.agents.descriptors import AgentDescriptor
from claybot.wire.base import Answer, Ok, Omitted


class AgentProblem(Answer):
    """A file of an agent that could not be used, and what was done about it."""

    agentId: str
    file: str
    error: str
    action: str


class StuckAgent(Answer):
    """An agent whose work a failed write stopped (a full disk): it tries again, waiting
    twice as long after each failure in a row (at most 30 s), until an item gets
    through."""

    agentId: str
    since: int = Field(description="The first failure in a row, unix milliseconds")
    error: str = Field(description="The latest failure")
    failures: int = Field(description="Failures in a row")


class AgentListing(Answer):
    agentId: str
    descriptor: AgentDescriptor
    type: Literal["user", "cron", "heartbeat", "subagent"]
    label: str
    createdAt: int = Field(description="Unix milliseconds")
    updatedAt: int = Field(description="Unix milliseconds")
    lifecycle: Literal["active", "sleeping"] = Field(
        description="`active`: in memory; `sleeping`: on disk only, woken by its next message"
    )
    pending: int = Field(description="Items waiting in its inbox (0 when sleeping)")
    problem: AgentProblem | Omitted = None
    stuck: StuckAgent | Omitted = None


class AgentList(Ok):
    agents: list[AgentListing]


class BackgroundAgent(Answer):
    """A subagent as persisted on disk (no live inbox status, seed 000)."""

    agentId: str
    name: str
    parentAgentId: str
    createdAt: int = Field(description="Unix milliseconds")
    updatedAt: int = Field(description="Unix milliseconds")
    status: Literal["idle"]
    lifecycle: Literal["active", "sleeping"] = Field(
        description="`active`: in memory; `sleeping`: on disk only"
    )
    pending: Literal[0] = Field(description="Always 0: no live inbox status (seed 000)")


class BackgroundAgentList(Ok):
    agents: list[BackgroundAgent]


class MessageAccepted(Ok):
    """The message is on disk: it will be processed exactly once."""

    agentId: str
    messageId: str
    duplicate: bool = Field(
        description="The message id was seen before: nothing new was queued, and this is "
        "the earlier message's agent"
    )


class AgentStopped(Ok):
    agentId: str
    stopped: bool = Field(description="false: no turn was running")


class AgentReset(Ok):
    agentId: str
    status: Literal["done", "queued"] = Field(
        description="`queued`: a long turn is still running; the reset follows it"
    )
