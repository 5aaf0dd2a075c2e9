"""The plugins that ship with ClayBot."""

from __future__ import annotations

from typing import Any

from claybot.plugins.definition import PluginDefinition


def builtin_definitions() -> list[PluginDefinition[Any]]:
    from claybot.plugins.builtin.clock import clock_definition
    from claybot.plugins.builtin.mcp import mcp_definition
    from claybot.plugins.builtin.shell import shell_definition
    from claybot.plugins.builtin.web import web_definition
    from claybot.plugins.telegram.plugin import telegram_definition

    return [
        clock_definition(),
        mcp_definition(),
        shell_definition(),
        telegram_definition(),
        web_definition(),
    ]
