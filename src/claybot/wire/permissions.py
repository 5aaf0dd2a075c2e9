"""Permission requests: asked by an agent, decided once by a person (or by the timeout)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from claybot.wire.base import Answer, Ok


class PermissionRequest(Answer):
    requestId: str
    agentId: str = Field(description="The agent that asked: the decision goes to it")
    agentLabel: str = Field(description="Who asked, for people")
    permission: str = Field(description="`@network`, `@read:/abs/path` or `@write:/abs/path`")
    reason: str
    connector: str = Field(description="Where the prompt was shown")
    userId: str
    channelId: str
    expiresAt: int = Field(description="Unix milliseconds; unanswered by then means denied")
    createdAt: int = Field(description="Unix milliseconds")
    status: Literal["pending", "granted", "denied"]
    decidedBy: str | None = Field(description="`user:<connector>`, `api`, `cli` or `timeout`")
    decidedAt: int | None = Field(description="Unix milliseconds")
    delivered: bool = Field(description="The asking agent has been told the decision")


class PermissionRequestList(Ok):
    requests: list[PermissionRequest]


class PermissionDecided(Ok):
    request: PermissionRequest
