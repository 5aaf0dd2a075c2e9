"""Agent tools: talk to other agents, start background agents, look around (seeds 001, 003)."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from claybot.agents.descriptors import (
    CronDescriptor,
    HeartbeatDescriptor,
    SubagentDescriptor,
    UserDescriptor,
)
from claybot.agents.system import AgentNotFound, AgentSystem, SubagentLimit
from claybot.permissions.tags import PermissionTagError, apply_grant, parse_tag, subset_of
from claybot.tools.base import ToolContext, ToolDefinition, ToolResult

MAX_TEXT_CHARS = 32_000
HISTORY_DEFAULT = 50
HISTORY_MAX = 500
LIST_MAX = 200


class SendAgentMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    agentId: str | None = Field(
        default=None,
        description="Target agent id. Default: your parent if you are a background agent, "
        "otherwise the most recent foreground (user) agent.",
    )


class StartBackgroundAgent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="Its first message.")
    name: str = Field(default="worker", min_length=1, max_length=64, pattern=r"^[^\x00-\x1f/]+$")
    permissions: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="Tags to pass on (@network, @read:/abs, @write:/abs); you must hold them.",
    )


class ListAgents(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadSessionHistory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agentId: str = Field(min_length=1, max_length=256)
    limit: int = Field(default=HISTORY_DEFAULT, ge=1, le=HISTORY_MAX)
    fromAt: int | None = Field(default=None, description="Only records at or after (ms).")
    toAt: int | None = Field(default=None, description="Only records at or before (ms).")


class AgentTools:
    def __init__(self, system: AgentSystem) -> None:
        self._system = system

    def definitions(self) -> list[ToolDefinition[Any]]:
        return [
            ToolDefinition(
                "send_agent_message",
                "Send a message to another agent (it arrives as a system message).",
                SendAgentMessage,
                self.send_agent_message,
            ),
            ToolDefinition(
                "start_background_agent",
                "Start a new background agent with a first message. Returns its id at once; "
                "its final answer comes back to you as a message when it is done.",
                StartBackgroundAgent,
                self.start_background_agent,
            ),
            ToolDefinition(
                "list_agents", "List the agents: id, type, label.", ListAgents, self.list_agents
            ),
            ToolDefinition(
                "read_session_history",
                "Read the recent history records of an agent you may see.",
                ReadSessionHistory,
                self.read_session_history,
            ),
        ]

    async def send_agent_message(
        self, arguments: SendAgentMessage, context: ToolContext
    ) -> ToolResult:
        system = self._system
        target = arguments.agentId
        if target is None:
            descriptor = system.descriptor_of(context.agent_id)
            if isinstance(descriptor, SubagentDescriptor):
                target = descriptor.parentAgentId
            else:
                target = system.listings.most_recent("most-recent-foreground")
        if target is None:
            return ToolResult("There is no foreground agent to send to yet.", is_error=True)
        if target == context.agent_id:
            return ToolResult("That is you; answer directly instead.", is_error=True)
        try:
            await system.submit(target, arguments.text, origin=context.agent_id)
        except AgentNotFound:
            return ToolResult(f"No agent with id {target!r}.", is_error=True)
        return ToolResult(f"Message sent to {target}.")

    async def start_background_agent(
        self, arguments: StartBackgroundAgent, context: ToolContext
    ) -> ToolResult:
        system = self._system
        permissions = system.runtime.default_permissions
        try:
            tags = [parse_tag(tag) for tag in arguments.permissions]
        except PermissionTagError as exc:
            return ToolResult(f"Invalid permission: {exc}", is_error=True)
        missing = subset_of(tags, context.permissions)
        if missing:
            listed = ", ".join(str(tag) for tag in missing)
            return ToolResult(
                f"You can only pass on permissions you hold; missing: {listed}", is_error=True
            )
        for tag in tags:
            permissions = apply_grant(permissions, tag)
        try:
            agent_id = await system.subagents.start(
                context.agent_id, arguments.name, arguments.prompt, permissions=permissions
            )
        except SubagentLimit as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(
            f"Background agent started: {agent_id}. Its result will arrive as a message."
        )

    async def list_agents(self, arguments: BaseModel, context: ToolContext) -> ToolResult:
        agents = self._system.listings.agents()[:LIST_MAX]
        lines = [
            f"{agent['agentId']}\t{agent['type']}\t{agent['label']}\t{agent['lifecycle']}"
            + ("\t(you)" if agent["agentId"] == context.agent_id else "")
            for agent in agents
        ]
        return ToolResult("\n".join(lines) or "No agents.")

    async def read_session_history(
        self, arguments: ReadSessionHistory, context: ToolContext
    ) -> ToolResult:
        system = self._system
        target = arguments.agentId
        if not system.exists(target):
            return ToolResult(f"No agent with id {target!r}.", is_error=True)
        if not self._may_read(context.agent_id, target):
            return ToolResult(
                "You may read your own history, your background agents', your parents' "
                "and (from a user agent) the cron and heartbeat agents'; not this one.",
                is_error=True,
            )
        records = await system.histories.between(
            target, from_at=arguments.fromAt, to_at=arguments.toAt, limit=arguments.limit
        )
        return ToolResult("\n".join(orjson.dumps(record).decode() for record in records))

    def _may_read(self, reader: str, target: str) -> bool:
        system = self._system
        if reader == target or self._is_ancestor(target, reader):
            return True
        if self._is_ancestor(reader, target):
            return True
        reader_descriptor = system.descriptor_of(reader)
        target_descriptor = system.descriptor_of(target)
        return isinstance(reader_descriptor, UserDescriptor) and isinstance(
            target_descriptor, CronDescriptor | HeartbeatDescriptor
        )

    def _is_ancestor(self, ancestor: str, agent_id: str) -> bool:
        """Whether ``ancestor`` is a parent, grandparent, ... of ``agent_id``."""
        seen: set[str] = set()
        current = agent_id
        while current not in seen and self._system.exists(current):
            seen.add(current)
            descriptor = self._system.descriptor_of(current)
            if not isinstance(descriptor, SubagentDescriptor):
                return False
            current = descriptor.parentAgentId
            if current == ancestor:
                return True
        return False
