"""The plugins that ship with ClayBot."""

from __future__ import annotations

from typing import Any

from claybot.engine.plugins.definition import PluginDefinition


def builtin_definitions() -> list[PluginDefinition[Any]]:
    from claybot.connectors.telegram.plugin import telegram_definition
    from claybot.engine.plugins.builtin.clock import clock_definition
    from claybot.engine.plugins.builtin.mcp import mcp_definition
    from claybot.engine.plugins.builtin.shell import shell_definition
    from claybot.engine.plugins.builtin.web import web_definition

    return [
        clock_definition(),
        mcp_definition(),
        shell_definition(),
        telegram_definition(),
        web_definition(),
    ]
