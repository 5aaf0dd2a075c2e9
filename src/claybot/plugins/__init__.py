"""Plugins: definitions, the catalog of installed ones, and the manager that runs instances.

The engine builds ``Registries`` once, a ``PluginCatalog.discover()`` and a
``PluginManager``; ``restore()`` at boot, ``shutdown()`` on exit.
"""

from claybot.plugins.api import PluginApi
from claybot.plugins.catalog import CatalogProblem, PluginCatalog
from claybot.plugins.definition import PluginDefinition, PluginInstance
from claybot.plugins.errors import (
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
from claybot.plugins.manager import LoadedPlugin, PluginFailure, PluginManager
from claybot.plugins.registrar import PluginRegistrar
from claybot.plugins.registries import (
    ConnectorEntry,
    ConnectorRegistry,
    ImageProviderRegistry,
    Registries,
)

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
    "PluginApi",
    "PluginAuthFailed",
    "PluginCatalog",
    "PluginDefinition",
    "PluginError",
    "PluginFailure",
    "PluginInstance",
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
