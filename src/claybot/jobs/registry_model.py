"""The MCP server registry's values (seed 002's ``agents`` rows): what a server is,
what registering one takes, and what a search finds. No database here, so the API's
models can name them without loading SQLAlchemy at boot."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from claybot.kernel.errors import Conflict, NotFound
from claybot.mcp_client.settings import McpServerSettings

Transport = Literal["stdio", "http"]
SERVER_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class ServerNotFound(NotFound):
    def __init__(self, server_id: str) -> None:
        super().__init__(f"no MCP server {server_id!r} in the registry")


class DuplicateServer(Conflict):
    code = "DUPLICATE"

    def __init__(self, package: str) -> None:
        super().__init__(f"an MCP server with package {package!r} is already registered")


@dataclass(frozen=True)
class McpToolInfo:
    name: str
    description: str
    # The tool's arguments as the server described them when it was verified (beyond
    # the seed's {name, description}): a job is offered the tool without starting it.
    input_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class NewServer:
    name: str
    description: str
    package_name: str
    version: str = "1.0.0"
    transport: Transport = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    url: str | None = None
    category: str = "general"
    documentation: str | None = None
    author: str | None = None
    repository_url: str | None = None


@dataclass(frozen=True)
class RegisteredServer:
    id: str
    name: str
    description: str
    package_name: str
    version: str
    transport: str
    command: str | None
    args: list[str]
    env: dict[str, str]
    url: str | None
    tools: list[McpToolInfo]
    category: str
    documentation: str | None
    author: str | None
    repository_url: str | None
    is_builtin: bool
    verified: bool
    verified_at: datetime | None
    verified_by: str | None
    created_at: datetime

    def connection_settings(self, timeout_s: float = 30.0) -> McpServerSettings:
        """How to reach it, named so its tools read ``mcp__<name>__<tool>``."""
        name = SERVER_NAME_UNSAFE.sub("_", self.name).strip("_-")[:32] or "server"
        return McpServerSettings(
            name=name,
            transport="http" if self.transport == "http" else "stdio",
            command=self.command,
            args=list(self.args),
            env=dict(self.env),
            url=self.url,
            timeout_s=timeout_s,
        )


@dataclass(frozen=True)
class Match:
    server: RegisteredServer
    similarity: float  # the share of the query's words the server matched, 0..1
