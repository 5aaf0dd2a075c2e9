"""The public MCP client for plugins: connect to a server, list and call its tools.

Its settings (``McpServerSettings``) are in ``claybot.plugin_api``; this module is apart
from it because it imports the MCP SDK, which takes most of a second: only a
plugin that uses MCP pays for that.
"""

from claybot.mcp_client.calls import as_tool_result
from claybot.mcp_client.connection import McpConnection, McpServerError, describe
from claybot.mcp_client.mapping import (
    McpArguments,
    result_of,
    tool_description,
    tool_name,
    tool_schema,
)

__all__ = [
    "McpArguments",
    "McpConnection",
    "McpServerError",
    "as_tool_result",
    "describe",
    "result_of",
    "tool_description",
    "tool_name",
    "tool_schema",
]
