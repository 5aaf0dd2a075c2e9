"""A permission request as people see it, and how it was decided.

Connectors show prompts (their approval UI) and the permission service decides them;
both sides use these types, so they live with the permissions, below the connectors.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing_extensions import TypedDict

from claybot.kernel.errors import Conflict, NotFound


def conversation_label(connector: str, user_id: str, channel_id: str) -> str:
    """How a user's own agent is named outside its conversation (``local:ann/cli``)."""
    return f"{connector}:{user_id}/{channel_id}"


def asker_in_conversation(label: str, connector: str, user_id: str, channel_id: str) -> str:
    """``label`` as the conversation a prompt is shown in reads it: its own agent is
    "this conversation" there, and only there (a list of requests names it)."""
    if label == conversation_label(connector, user_id, channel_id):
        return "this conversation"
    return label


class PermissionPromptJson(TypedDict):
    """A prompt's fields, the start of a request as the API and its events send it."""

    requestId: str
    agentId: str
    agentLabel: str
    permission: str
    reason: str
    connector: str
    userId: str
    channelId: str
    expiresAt: int


@dataclass(frozen=True)
class PermissionPrompt:
    """A permission request shown to a user through a connector's approval UI."""

    request_id: str
    agent_id: str  # the agent that asked: the decision is routed to it by this id
    agent_label: str  # who asked, for people ("subagent:research", "telegram:42/42")
    permission: str  # the tag: "@network", "@read:/abs/path" or "@write:/abs/path"
    reason: str
    connector: str  # where the prompt is shown
    user_id: str
    channel_id: str
    expires_at: int  # ms since the epoch; unanswered by then means denied

    @property
    def asker(self) -> str:
        """Who asked, as the conversation the prompt is shown in says it."""
        return asker_in_conversation(
            self.agent_label, self.connector, self.user_id, self.channel_id
        )

    def text(self) -> str:
        return f"Permission request from {self.asker}: {self.permission}\nReason: {self.reason}"

    def to_dict(self) -> PermissionPromptJson:
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
