"""A permission request as people see it, and how it was decided.

Connectors show prompts (their approval UI) and the permission service decides them;
both sides use these types, so they live with the permissions, below the connectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from claybot.kernel.errors import Conflict, NotFound


@dataclass(frozen=True)
class PermissionPrompt:
    """A permission request shown to a user through a connector's approval UI."""

    request_id: str
    agent_id: str  # the agent that asked: the decision is routed to it by this id
    agent_label: str  # who asked, for people ("subagent research", "you")
    permission: str  # the tag: "@network", "@read:/abs/path" or "@write:/abs/path"
    reason: str
    connector: str  # where the prompt is shown
    user_id: str
    channel_id: str
    expires_at: int  # ms since the epoch; unanswered by then means denied

    def text(self) -> str:
        return (
            f"Permission request from {self.agent_label}: {self.permission}\nReason: {self.reason}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requestId": self.request_id,
            "agentId": self.agent_id,
            "agentLabel": self.agent_label,
            "permission": self.permission,
            "reason": self.reason,
            "connector": self.connector,
            "userId": self.user_id,
            "channelId": self.channel_id,
            "expiresAt": self.expires_at,
        }


@dataclass(frozen=True)
class PermissionOutcome:
    request_id: str
    approved: bool
    decided_by: str  # "user:<connector>", "api", "cli" or "timeout"


class PermissionAlreadyDecided(Conflict, RuntimeError):
    code = "already_decided"

    def __init__(self, outcome: PermissionOutcome) -> None:
        verdict = "allowed" if outcome.approved else "denied"
        super().__init__(f"request {outcome.request_id} was already {verdict}", field="requestId")
        self.outcome = outcome


class PermissionRequestNotFound(NotFound, LookupError):
    """No request has this id (or none this connector showed)."""

    code = "request_not_found"

    def __init__(self, request_id: str) -> None:
        super().__init__(f"no permission request with id {request_id!r}", field="requestId")
        self.request_id = request_id
