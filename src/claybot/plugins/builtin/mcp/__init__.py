"""The ``mcp`` plugin: tools from Model Context Protocol servers, as ``mcp__<server>__<tool>``."""

from claybot.plugin_api import McpServerSettings
from claybot.plugins.builtin.mcp.definition import mcp_definition
from claybot.plugins.builtin.mcp.settings import McpSettings

__all__ = ["McpServerSettings", "McpSettings", "mcp_definition"]
