"""The plugins that ship with ClayBot: ``clock``, ``mcp``, ``shell`` and ``web`` (``telegram``
has its own package). Each is declared in the ``claybot.plugins`` entry-point group of
ClayBot's own ``pyproject.toml`` and imports only ``claybot.plugin_api``, like any other plugin.
"""
