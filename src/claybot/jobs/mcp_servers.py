"""The MCP servers a worker's jobs found with ``discover_tools``, connected on first use.

A server's tools are offered to the job as ``mcp__<server>__<tool>`` with the input
schema its verification recorded, so offering them starts nothing; the server is
started (stdio) or reached (http) when a job first calls one, and stays connected
for the worker's other jobs until the worker stops. The MCP SDK is imported only
then too: a worker whose jobs never call a server never pays for it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import RootModel

from claybot.jobs.registry_model import McpToolInfo, RegisteredServer
from claybot.mcp_client.names import tool_name
from claybot.tools.base import AgentKind, ToolContext, ToolDefinition, ToolResult

if TYPE_CHECKING:
    import mcp_types

    from claybot.mcp_client.connection import McpConnection

log = logging.getLogger(__name__)

JOB: frozenset[AgentKind] = frozenset({"job"})
MAX_DESCRIPTION_CHARS = 2000


async def load_sdk() -> None:
    """Import the MCP client (and the SDK, most of a second) off the event loop."""
    await asyncio.to_thread(importlib.import_module, "claybot.mcp_client.connection")


class McpCallArguments(RootModel[dict[str, Any]]):
    """Whatever object the model sends; the MCP server validates it against its schema."""


class McpServers:
    def __init__(self, log_dir: Path, call_timeout_s: float = 60.0) -> None:
        self._log_dir = log_dir
        self._call_timeout_s = call_timeout_s
        self._connections: dict[str, McpConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def tools_of(
        self, server: RegisteredServer, taken: set[str]
    ) -> list[ToolDefinition[McpCallArguments]]:
        """The server's tools as a job's tools, named apart from ``taken`` (which grows)."""
        settings = server.connection_settings()
        definitions: list[ToolDefinition[McpCallArguments]] = []
        for tool in server.tools:
            name = tool_name(settings.name, tool.name, taken)
            taken.add(name)
            schema = dict(tool.input_schema or {"type": "object", "properties": {}})
            schema.setdefault("type", "object")
            definitions.append(
                ToolDefinition(
                    name,
                    f"[MCP server {server.name}] {tool.description or tool.name}"[
                        :MAX_DESCRIPTION_CHARS
                    ],
                    McpCallArguments,
                    _Call(self, server, tool.name),
                    visible_to=JOB,
                    json_schema=schema,
                )
            )
        return definitions

    async def call(
        self, server: RegisteredServer, tool: str, arguments: dict[str, Any]
    ) -> ToolResult:
        await load_sdk()
        from claybot.mcp_client.calls import as_tool_result

        return await as_tool_result(server.name, tool, self._call(server, tool, arguments))

    async def _call(
        self, server: RegisteredServer, tool: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        connection = await self._connected(server)  # started on first use
        return await connection.call(tool, arguments)

    async def _connected(self, server: RegisteredServer) -> McpConnection:
        from claybot.mcp_client.connection import McpConnection

        lock = self._locks.setdefault(server.id, asyncio.Lock())
        async with lock:
            connection = self._connections.get(server.id)
            if connection is not None and connection.connected:
                return connection
            if connection is not None:  # it was lost: start it again
                await connection.close()
            await asyncio.to_thread(self._log_dir.mkdir, parents=True, exist_ok=True)
            connection = McpConnection(
                server.connection_settings(self._call_timeout_s), self._log_dir
            )
            await connection.start()
            self._connections[server.id] = connection
            log.info(
                "MCP server %r connected for jobs",
                server.name,
                extra={"action": "jobs.mcp_connected", "server": server.name},
            )
            return connection

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


class _Call:
    """The ``run`` of one offered tool: the server's tool, by its own name."""

    def __init__(self, servers: McpServers, server: RegisteredServer, tool: str) -> None:
        self._servers = servers
        self._server = server
        self._tool = tool

    async def __call__(self, arguments: McpCallArguments, context: ToolContext) -> ToolResult:
        return await self._servers.call(self._server, self._tool, arguments.root)


async def list_tools(server: RegisteredServer, log_dir: Path) -> list[McpToolInfo]:
    """Connect to the server, list its tools and disconnect: what verifying it records.
    ``McpServerError`` says why it could not be reached."""
    await load_sdk()
    from claybot.mcp_client.connection import McpConnection
    from claybot.mcp_client.mapping import tool_schema

    await asyncio.to_thread(log_dir.mkdir, parents=True, exist_ok=True)
    connection = McpConnection(server.connection_settings(), log_dir)
    tools = await connection.start()
    await connection.close()
    return [
        McpToolInfo(tool.name, tool.description or tool.title or "", tool_schema(tool))
        for tool in tools
    ]
