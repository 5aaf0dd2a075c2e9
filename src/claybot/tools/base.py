"""Tool definitions and the registry agents pick their tools from."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from claybot.files.reference import FileReference
from claybot.permissions.model import Permissions
from claybot.providers.base import ToolSchema

AgentKind = Literal["user", "cron", "heartbeat", "subagent", "job"]
# The agents' kinds: a tool is visible to these unless it says otherwise. A job runs
# with a tool set of its own (seed 002's), so "job" is not among them.
ALL_AGENT_KINDS: frozenset[AgentKind] = frozenset({"user", "cron", "heartbeat", "subagent"})
# A tool that ends the turn: "finish" (its text is the turn's answer) or "ask" (the
# turn waits for a person; the call's result is their answer, appended when it comes).
TurnEnd = Literal["finish", "ask"]


@dataclass(frozen=True)
class ToolContext:
    agent_id: str
    agent_kind: AgentKind
    message_id: str | None
    permissions: Permissions = field(default_factory=Permissions)  # what the agent may touch


@dataclass(frozen=True)
class Delivery:
    """A message a tool sends to the agent's conversation (``send_file``'s): the turn
    loop records it before it goes out and delivers it as it does a reply, once."""

    text: str  # the files' caption
    files: tuple[FileReference, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    ends_turn: TurnEnd | None = None
    delivers: Delivery | None = None


Args = TypeVar("Args", bound=BaseModel)

# A tool's body: its validated arguments (an instance of its own model, never a dict)
# and who calls it. What it raises becomes an error result the model reads, in one
# place (the turn loop), so a tool body needs no try/except of its own.
ToolRun = Callable[[Args, ToolContext], Awaitable[ToolResult | str]]


@dataclass(frozen=True)
class ToolDefinition(Generic[Args]):
    """A tool, generic over its argument model: ``run`` gets a ``parameters`` instance."""

    name: str
    description: str
    parameters: type[Args]
    run: ToolRun[Args]
    visible_to: frozenset[AgentKind] = ALL_AGENT_KINDS
    # Shown to the model instead of ``parameters``' schema: for tools described elsewhere
    # (an MCP server), whose arguments ``parameters`` then accepts as they come.
    json_schema: dict[str, Any] | None = None
    # The call must be durable before the tool runs, so that a crash while it runs is
    # reported to the model as an interrupted call instead of running it again. False
    # for a tool with no effect outside the transcript, or whose one effect is a write
    # that carries the transcript's unwritten records with it (a job's ``write_file``):
    # call and effect are then written together or not at all, and an answer made only
    # of such calls costs no write of its own.
    durable_first: bool = True

    def schema(self) -> ToolSchema:
        schema = self.json_schema
        if schema is None:
            schema = argument_schema(self.parameters)
        return ToolSchema(self.name, self.description, schema)


@functools.cache
def argument_schema(parameters: type[BaseModel]) -> dict[str, Any]:
    """An argument model's JSON schema (shared; do not modify). Generating one costs
    about a millisecond, and every job builds its tools afresh. A dict: a JSON Schema
    document is arbitrary JSON, and it is sent to the model as it is."""
    return parameters.model_json_schema()


class ToolRegistry:
    def __init__(self, tools: Iterable[ToolDefinition[Any]] = ()) -> None:
        self._tools: dict[str, ToolDefinition[Any]] = {}
        # Generating a JSON schema costs ~1 ms per tool: every turn sends them, so
        # they are built once per agent kind and rebuilt when the tools change.
        self._schemas: dict[AgentKind, list[ToolSchema]] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolDefinition[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._schemas.clear()

    def unregister(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self._schemas.clear()

    def schemas_for(self, kind: AgentKind) -> list[ToolSchema]:
        """The schemas of the tools ``kind`` sees (cached; do not modify)."""
        schemas = self._schemas.get(kind)
        if schemas is None:
            schemas = self._schemas[kind] = [tool.schema() for tool in self.visible_to(kind)]
        return schemas

    def get(self, name: str) -> ToolDefinition[Any] | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def visible_to(self, kind: AgentKind) -> list[ToolDefinition[Any]]:
        return [tool for tool in self._tools.values() if kind in tool.visible_to]
