"""A permission request as people see it, and how it was decided.

Connectors show prompts (their approval UI) and the permission service decides them;
both sides use these types, so they live with the permissions, below the connectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


class PermissionAlreadyDecided(RuntimeError):
    def __init__(self, outcome: PermissionOutcome) -> None:
        verdict = "allowed" if outcome.approved else "denied"
        super().__init__(f"request {outcome.request_id} was already {verdict}")
        self.outcome = outcome
