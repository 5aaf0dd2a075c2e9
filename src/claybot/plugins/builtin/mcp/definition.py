"""The ``mcp`` plugin's definition, importable without importing the MCP SDK."""

from __future__ import annotations

from claybot.plugin_api import PluginApi, PluginDefinition, PluginInstance
from claybot.plugins.builtin.mcp.settings import McpSettings

PLUGIN_ID = "mcp"


def _create(api: PluginApi[McpSettings]) -> PluginInstance:
    # The SDK takes most of a second to import; only an engine that runs the plugin pays it.
    from claybot.plugins.builtin.mcp.plugin import McpPlugin

    return McpPlugin(api)


def mcp_definition() -> PluginDefinition[McpSettings]:
    return PluginDefinition(
        id=PLUGIN_ID,
        name="MCP",
        description="Tools from Model Context Protocol servers (stdio or streamable HTTP), "
        "named mcp__<server>__<tool>.",
        settings_model=McpSettings,
        create=_create,
    )
