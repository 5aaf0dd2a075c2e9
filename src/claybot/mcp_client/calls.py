"""A tool call to an MCP server as the model reads it: a failure is an error result,
never an exception that ends the turn."""

from __future__ import annotations

from collections.abc import Awaitable

import mcp_types

from claybot.mcp_client.connection import McpServerError, describe
from claybot.mcp_client.mapping import result_of
from claybot.tools.base import ToolResult


async def as_tool_result(
    server: str, tool: str, call: Awaitable[mcp_types.CallToolResult]
) -> ToolResult:
    """Await ``call`` (reaching the server and calling its tool) and say how it went."""
    try:
        result = await call
    except McpServerError as exc:
        return ToolResult(f"MCP server {server!r}, tool {tool!r}: {exc}", is_error=True)
    except Exception as exc:  # protocol errors, a dead pipe: the model reads what happened
        return ToolResult(
            f"MCP server {server!r}, tool {tool!r} failed: {describe(exc)}", is_error=True
        )
    return result_of(result)
