"""``request_permission`` (foreground) and ``request_permission_via_parent`` (background).

Both return at once: the user answers through the connector's approval UI (or
the API or CLI), and the decision arrives later as a message to the asking
agent, which resumes with it. Unanswered requests are denied after a timeout.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claybot.permissions.protected import ProtectedPaths
from claybot.permissions.requests import PermissionRequest
from claybot.permissions.tags import PermissionTagError, grants, parse_tag
from claybot.tools.base import ToolContext, ToolDefinition, ToolResult

# (asking agent id, normalised tag, reason) -> the recorded request; ValueError if impossible.
AskPermission = Callable[[str, str, str], Awaitable[PermissionRequest]]


class RequestPermission(BaseModel):
    model_config = ConfigDict(extra="forbid")
    permission: str = Field(
        min_length=1,
        max_length=4200,
        description="One tag: @network, @read:/absolute/path or @write:/absolute/path.",
    )
    reason: str = Field(min_length=1, max_length=2000, description="Why you need it, briefly.")


class PermissionTools:
    def __init__(self, ask: AskPermission, protected: ProtectedPaths) -> None:
        self._ask = ask
        self._protected = protected

    def definitions(self) -> list[ToolDefinition[Any]]:
        return [
            ToolDefinition(
                "request_permission",
                "Ask the user for a permission. Returns at once; the answer arrives later as "
                "a message, after which you continue.",
                RequestPermission,
                self.request,
                visible_to=frozenset({"user"}),
            ),
            ToolDefinition(
                "request_permission_via_parent",
                "Ask the user (through the most recent foreground conversation) for a "
                "permission. Returns at once; the answer arrives later as a message.",
                RequestPermission,
                self.request,
                visible_to=frozenset({"subagent", "cron", "heartbeat"}),
            ),
        ]

    async def request(self, arguments: RequestPermission, context: ToolContext) -> ToolResult:
        try:
            tag = parse_tag(arguments.permission)
        except PermissionTagError as exc:
            return ToolResult(f"Invalid permission: {exc}", is_error=True)
        if grants(context.permissions, tag):
            return ToolResult(f"You already have {tag}.")
        refusal = None if tag.path is None else self._protected.ungrantable(tag.path)
        if refusal is not None:
            return ToolResult(f"Not asked: {refusal}.", is_error=True)
        try:
            request = await self._ask(context.agent_id, str(tag), arguments.reason)
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(
            f"Permission request {request.id} for {tag} was sent to the user. "
            "You will get a message with the decision; until then, do not use it."
        )
