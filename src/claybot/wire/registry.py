"""Seed 002's MCP registry API (``/api/v1/agents``): bodies and answers, snake_case."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from claybot.jobs.registry_model import Match, RegisteredServer
from claybot.wire.base import Answer
from claybot.wire.bodies import JSON_INTEGER, NO_NUL

# Seed 002 allowed /^[a-z0-9_-]+$/i, which refused scoped npm names (@scope/pkg).
PACKAGE_PATTERN = r"^(@[A-Za-z0-9_.-]+/)?[A-Za-z0-9_.-]+$"
EnvName = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# What each transport needs, in the document too (so a generated client knows).
TRANSPORT_RULE: list[Any] = [
    {
        "properties": {"transport": {"const": "stdio"}, "command": {"type": "string"}},
        "required": ["command"],
    },
    {
        "properties": {"transport": {"const": "http"}, "url": {"type": "string"}},
        "required": ["transport", "url"],
    },
]


class RegisterServer(_Body):
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"anyOf": TRANSPORT_RULE}
    )

    name: str = Field(min_length=1, max_length=100, pattern=NO_NUL)
    description: str = Field(min_length=10, max_length=5000, pattern=NO_NUL)
    package_name: str = Field(min_length=1, max_length=200, pattern=PACKAGE_PATTERN)
    version: str = Field(default="1.0.0", min_length=1, max_length=32, pattern=NO_NUL)
    category: str = Field(default="general", min_length=1, max_length=64, pattern=NO_NUL)
    transport: Literal["stdio", "http"] = Field(
        default="stdio", description="How to reach it (seed 002's sse is not supported)"
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        pattern=NO_NUL,
        description="stdio: the program to start",
    )
    args: list[Annotated[str, Field(max_length=2000, pattern=NO_NUL)]] = Field(
        default_factory=list, max_length=50
    )
    env: dict[EnvName, Annotated[str, Field(max_length=4000, pattern=NO_NUL)]] = Field(
        default_factory=dict, max_length=50, description="Never shown again"
    )
    url: str | None = Field(
        default=None,
        max_length=2000,
        pattern=r"^https?://[^\x00]*$",
        description="http: its address",
    )
    documentation: str | None = Field(default=None, max_length=50_000, pattern=NO_NUL)
    author: str | None = Field(default=None, max_length=200, pattern=NO_NUL)
    repository_url: str | None = Field(default=None, max_length=2000, pattern=NO_NUL)

    @model_validator(mode="after")
    def _transport_needs(self) -> RegisterServer:
        if self.transport == "stdio" and self.command is None:
            raise ValueError("a stdio server needs 'command'")
        if self.transport == "http" and self.url is None:
            raise ValueError("an http server needs 'url'")
        return self


class Discover(_Body):
    task: str = Field(min_length=1, max_length=10_000)
    threshold: float = Field(default=0.3, ge=0, le=1)
    limit: Annotated[int, Field(ge=1, le=20), JSON_INTEGER] = 5


class ToolInfo(BaseModel):
    name: str
    description: str


class McpServer(Answer):
    id: str
    name: str
    description: str
    package_name: str
    version: str
    category: str
    transport: str
    verified: bool
    verified_at: str | None
    verified_by: str | None
    tools: list[ToolInfo]
    created_at: str

    @classmethod
    def of(cls, server: RegisteredServer) -> McpServer:
        # The command, its arguments and environment are not shown: tokens travel there.
        return cls(
            id=server.id,
            name=server.name,
            description=server.description,
            package_name=server.package_name,
            version=server.version,
            category=server.category,
            transport=server.transport,
            verified=server.verified,
            verified_at=None if server.verified_at is None else server.verified_at.isoformat(),
            verified_by=server.verified_by,
            tools=[ToolInfo(name=t.name, description=t.description) for t in server.tools],
            created_at=server.created_at.isoformat(),
        )


class McpServerList(Answer):
    agents: list[McpServer]
    count: int = Field(description="Servers that match, over all pages")
    offset: int
    limit: int


class Discovered(BaseModel):
    id: str
    name: str
    package_name: str
    similarity: float = Field(description="The share of the task's words it matched, 0 to 1")

    @classmethod
    def of(cls, match: Match) -> Discovered:
        server = match.server
        return cls(
            id=server.id,
            name=server.name,
            package_name=server.package_name,
            similarity=match.similarity,
        )


class DiscoverResult(Answer):
    agents: list[Discovered]
    count: int
    threshold: float
