"""The ``mcp`` plugin: connects to the configured MCP servers and registers their tools.

Each server's tools become ``mcp__<server>__<tool>`` with the server's own input
schema. A server that fails to start is logged and reported as a plugin event
while the others load; only when none starts does the load fail (not ready, so
a later start tries again). A failing tool call is an error result the model
reads, never an exception that ends the turn.
"""

from __future__ import annotations

import asyncio

import mcp_types

from claybot.plugin_api import (
    PluginApi,
    PluginNotReady,
    RegistrationError,
    ToolContext,
    ToolDefinition,
    ToolResult,
)
from claybot.plugin_api.mcp import (
    McpArguments,
    McpConnection,
    as_tool_result,
    tool_description,
    tool_name,
    tool_schema,
)
from claybot.plugins.builtin.mcp.settings import McpSettings

SERVER_FAILED = "mcp.server_failed"
SERVER_CONNECTED = "mcp.server_connected"


class McpToolCall:
    """The ``run`` of one registered tool: forwards to its server's tool by its real name."""

    def __init__(self, connection: McpConnection, tool: str) -> None:
        self._connection = connection
        self._tool = tool

    async def __call__(self, arguments: McpArguments, context: ToolContext) -> ToolResult:
        return await as_tool_result(
            self._connection.name, self._tool, self._connection.call(self._tool, arguments.root)
        )


class McpPlugin:
    def __init__(self, api: PluginApi[McpSettings]) -> None:
        self._api = api
        self._connections = [McpConnection(server, api.data_dir) for server in api.settings.servers]
        self.failures: dict[str, str] = {}  # server name -> why it did not start

    async def load(self) -> None:
        outcomes = await asyncio.gather(
            *(connection.start() for connection in self._connections), return_exceptions=True
        )
        started = 0
        for connection, outcome in zip(self._connections, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # cancelled: the load itself is being abandoned
                self._failed(connection.name, str(outcome))
                continue
            started += 1
            names = self._register(connection, outcome)
            self._api.emit(SERVER_CONNECTED, {"server": connection.name, "tools": names})
        if started == 0:
            problems = "; ".join(f"{name}: {why}" for name, why in self.failures.items())
            raise PluginNotReady(f"no MCP server could be started ({problems})")

    def _failed(self, server: str, why: str) -> None:
        self.failures[server] = why
        self._api.logger.warning(
            "MCP server %r failed to start: %s; check its settings and its log %s",
            server,
            why,
            self._api.data_dir / f"{server}.stderr.log",
            extra={"action": SERVER_FAILED, "server": server},
        )
        self._api.emit(SERVER_FAILED, {"server": server, "error": why})

    def _register(self, connection: McpConnection, tools: list[mcp_types.Tool]) -> list[str]:
        registered: list[str] = []
        for tool in tools:
            name = tool_name(connection.name, tool.name, set(registered))
            definition = ToolDefinition(
                name=name,
                description=tool_description(connection.name, tool),
                parameters=McpArguments,
                run=McpToolCall(connection, tool.name),
                json_schema=tool_schema(tool),
            )
            try:
                self._api.registrar.register_tool(definition)
            except RegistrationError as exc:
                self._api.logger.warning(
                    "MCP tool %r of server %r skipped: %s",
                    tool.name,
                    connection.name,
                    exc.message,
                    extra={"action": "mcp.tool_skipped", "server": connection.name},
                )
                continue
            registered.append(name)
        return registered

    async def unload(self) -> None:
        await asyncio.gather(*(connection.close() for connection in self._connections))
