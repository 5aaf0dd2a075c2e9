"""Plugin instances: loaded, configured, failed, and the catalog of installed plugins."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from claybot.kernel.errors import LoadFailureKind
from claybot.wire.base import Answer, Ok, Omitted


class PluginSummary(Answer):
    """A loaded plugin instance (seed 000)."""

    id: str = Field(description="The instance id")
    pluginId: str
    name: str


class ConnectorSummary(Answer):
    """A connector messages can come in and go out through (seed 000)."""

    id: str = Field(description="The connector id: the plugin instance id, or `local`/`webchat`")
    pluginId: str = Field(description="`builtin` for the engine's own connectors")
    name: str
    loadedAt: str = Field(description="ISO 8601, UTC")


class PluginFailure(Answer):
    """An instance that failed to load (at boot or when asked), and why."""

    id: str = Field(description="The instance id")
    pluginId: str
    at: str = Field(description="ISO 8601, UTC")
    code: str
    message: str
    field: str | Omitted = None
    kind: LoadFailureKind | Omitted = None


class ConfiguredPlugin(Answer):
    """An entry of settings.json, with its secrets redacted."""

    instanceId: str
    pluginId: str
    enabled: bool
    settings: dict[str, Any]


class CatalogPlugin(Answer):
    """An installed plugin, loaded or not."""

    id: str
    name: str
    description: str
    exclusive: bool = Field(description="At most one instance, under the plugin's id")
    settingsSchema: dict[str, Any] | None = Field(
        description="The JSON schema of its settings; null if the plugin's model has none"
    )
    builtin: bool


class PluginListing(Ok):
    loaded: list[PluginSummary]
    configured: list[ConfiguredPlugin]
    failures: list[PluginFailure]
    catalog: list[CatalogPlugin]


class PluginLoaded(Ok):
    plugin: PluginSummary


class PluginUnloaded(Ok):
    instanceId: str
