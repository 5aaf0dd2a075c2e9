"""The registries plugins add to, shared by the whole engine.

The engine builds one ``Registries`` at startup and hands it to the plugin
manager; agents pick tools from ``tools``, replies go out through
``connectors.get(message.connector)``, and so on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from typing_extensions import TypedDict

from claybot.connectors.base import Connector
from claybot.providers.base import ImageProvider
from claybot.providers.registry import ProviderRegistry
from claybot.tools.base import ToolRegistry

# The ``pluginId`` of a connector the engine itself provides (seed 000 has a string
# there for every connector), which has no plugin behind it.
BUILTIN_PLUGIN_ID = "builtin"


class ConnectorSummary(TypedDict):
    """A registered connector as the engine's status lists it."""

    id: str
    pluginId: str  # ``BUILTIN_PLUGIN_ID`` for the engine's own
    name: str
    loadedAt: str  # ISO 8601, UTC, with a ``Z``


class ImageProviderSummary(TypedDict):
    id: str
    name: str  # the id again (seed 000's clients show a name)
    label: str


@dataclass(frozen=True)
class ConnectorEntry:
    connector: Connector
    plugin_id: str | None  # None for a connector the engine itself registered
    name: str
    loaded_at: datetime

    @property
    def id(self) -> str:
        return self.connector.id

    def summary(self) -> ConnectorSummary:
        return {
            "id": self.id,
            "pluginId": self.plugin_id or BUILTIN_PLUGIN_ID,
            "name": self.name,
            "loadedAt": self.loaded_at.isoformat().replace("+00:00", "Z"),
        }


class ConnectorRegistry:
    """Connectors by id. A message's ``connector`` field is this id (a plugin instance id)."""

    def __init__(self) -> None:
        self._entries: dict[str, ConnectorEntry] = {}

    def register(
        self,
        connector: Connector,
        *,
        plugin_id: str | None,
        name: str,
        loaded_at: datetime,
    ) -> ConnectorEntry:
        if connector.id in self._entries:
            raise ValueError(f"a connector with id {connector.id!r} is already registered")
        entry = ConnectorEntry(connector, plugin_id, name, loaded_at)
        self._entries[connector.id] = entry
        return entry

    def unregister(self, connector_id: str) -> None:
        self._entries.pop(connector_id, None)

    def get(self, connector_id: str) -> Connector | None:
        entry = self._entries.get(connector_id)
        return entry.connector if entry is not None else None

    def entry(self, connector_id: str) -> ConnectorEntry | None:
        return self._entries.get(connector_id)

    def ids(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> list[ConnectorEntry]:
        return list(self._entries.values())

    def summaries(self) -> list[ConnectorSummary]:
        return [entry.summary() for entry in self._entries.values()]


class ImageProviderRegistry:
    def __init__(self) -> None:
        self._providers: dict[str, ImageProvider] = {}

    def register(self, provider: ImageProvider) -> None:
        if provider.id in self._providers:
            raise ValueError(f"an image provider with id {provider.id!r} is already registered")
        self._providers[provider.id] = provider

    def unregister(self, provider_id: str) -> None:
        self._providers.pop(provider_id, None)

    def get(self, provider_id: str) -> ImageProvider | None:
        return self._providers.get(provider_id)

    def providers(self) -> list[ImageProvider]:
        return list(self._providers.values())

    def summaries(self) -> list[ImageProviderSummary]:
        return [{"id": p.id, "name": p.id, "label": p.label} for p in self._providers.values()]


@dataclass
class Registries:
    connectors: ConnectorRegistry = field(default_factory=ConnectorRegistry)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    providers: ProviderRegistry = field(default_factory=ProviderRegistry)
    images: ImageProviderRegistry = field(default_factory=ImageProviderRegistry)
