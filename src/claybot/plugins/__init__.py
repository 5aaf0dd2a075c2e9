"""The plugin host: the catalog of installed plugins, the manager that runs instances, and
the built-in plugins (``builtin/``, ``telegram/``).

What a plugin itself sees is ``claybot.plugin_api``; this package is the engine's side.
The engine builds ``Registries`` once, a ``PluginCatalog.discover()`` and a
``PluginManager``; ``restore()`` at boot, ``shutdown()`` on exit.
"""

from claybot.plugin_api.errors import (
    ExclusivePluginConflict,
    InstanceAlreadyLoaded,
    InstanceIdTaken,
    InstanceNotFound,
    InvalidInstanceId,
    PluginAuthFailed,
    PluginError,
    PluginLoadFailed,
    PluginNotReady,
    PluginSettingsInvalid,
    RegistrationError,
    SettingsFileError,
    UnknownPlugin,
)
from claybot.plugin_api.registrar import PluginRegistrar
from claybot.plugin_api.registries import (
    ConnectorEntry,
    ConnectorRegistry,
    ImageProviderRegistry,
    Registries,
)
from claybot.plugins.catalog import CatalogProblem, PluginCatalog
from claybot.plugins.manager import LoadedPlugin, PluginFailure, PluginManager

__all__ = [
    "CatalogProblem",
    "ConnectorEntry",
    "ConnectorRegistry",
    "ExclusivePluginConflict",
    "ImageProviderRegistry",
    "InstanceAlreadyLoaded",
    "InstanceIdTaken",
    "InstanceNotFound",
    "InvalidInstanceId",
    "LoadedPlugin",
    "PluginAuthFailed",
    "PluginCatalog",
    "PluginError",
    "PluginFailure",
    "PluginLoadFailed",
    "PluginManager",
    "PluginNotReady",
    "PluginRegistrar",
    "PluginSettingsInvalid",
    "RegistrationError",
    "Registries",
    "SettingsFileError",
    "UnknownPlugin",
]
