"""The settings the engine runs with, and the changes that rebuild what depends on them.

Settings, auth and plugin instances are written to the home's config files; the providers
are built from settings and auth, and a plugin may register a provider type. So every
change here writes the files, refreshes the settings held in memory and rebuilds the
providers, in one place, which leaves ``engine.py`` to build and wire (DESIGN.md §4).
"""

from __future__ import annotations

from typing import Any

from claybot.config.auth import AuthFile
from claybot.config.settings import Settings
from claybot.config.store import ConfigStore
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.plugins import LoadedPlugin, PluginManager
from claybot.plugins.manager import PluginSummary
from claybot.providers.configured import ConfiguredProviders

__all__ = ["LiveConfiguration"]


class LiveConfiguration:
    def __init__(
        self,
        config: ConfigStore,
        events: EventBus,
        plugins: PluginManager,
        providers: ConfiguredProviders,
    ) -> None:
        self.config = config
        self.events = events
        self.plugins = plugins
        self.providers = providers
        self.settings: Settings = Settings()

    def reread(self) -> None:
        """Take settings.json as it is on disk (ConfigError if it does not load)."""
        self.settings = self.config.read_settings()

    async def rebuild_providers(self) -> None:
        """Create the enabled providers in priority order; a broken one is reported, not fatal."""
        await self.providers.rebuild(self.settings, self.config.read_auth())

    async def reload(self) -> None:
        """Apply settings.json as it is on disk now: the providers are built again and
        the plugin instances follow it (what seed 000's ``POST /v1/engine/reload`` did
        after its CLI edited the file). ConfigError, and nothing changes, if it does not
        load."""
        self.reread()
        await self.plugins.follow(self.settings)
        await self.rebuild_providers()  # a plugin may have brought or taken a provider type

    # -- settings and auth --------------------------------------------------------------

    async def update_settings(self, settings: Settings) -> None:
        self.config.write_settings(settings)
        self.settings = settings
        await self.rebuild_providers()

    def read_auth(self) -> AuthFile:
        return self.config.read_auth()

    def credential_owners(self) -> list[str]:
        """Where a credential of auth.json is looked up: a provider's id or a plugin
        instance's id, sorted."""
        plugins = {entry["instanceId"] for entry in self.plugins.configured()}
        return sorted({provider.id for provider in self.settings.providers} | plugins)

    async def set_auth_field(self, entry_id: str, key: str, value: str) -> None:
        auth: AuthFile = self.config.read_auth().with_field(entry_id, key, value)
        self.config.write_auth(auth)
        self.events.emit(EventType.AUTH_UPDATED, {"id": entry_id, "key": key})
        await self.rebuild_providers()

    async def remove_auth(self, entry_id: str, key: str | None = None) -> bool:
        """Remove an entry of auth.json, or one of its fields; False if there was none."""
        auth: AuthFile = self.config.read_auth()
        if not auth.has(entry_id, key):
            return False
        self.config.write_auth(auth.without(entry_id, key))
        self.events.emit(EventType.AUTH_UPDATED, {"id": entry_id, "key": key or "*"})
        await self.rebuild_providers()
        return True

    # -- plugins --------------------------------------------------------------------------

    # The plugin manager persists the instance in settings.json: settings are read back
    # from disk rather than patched here, so memory and file cannot disagree.
    async def load_plugin(
        self, plugin_id: str, instance_id: str | None, settings: dict[str, Any] | None
    ) -> PluginSummary:
        loaded: LoadedPlugin = await self.plugins.load(plugin_id, instance_id, settings)
        self.reread()
        await self.rebuild_providers()  # the plugin may have registered a provider type
        return loaded.summary()

    async def unload_plugin(self, instance_id: str) -> None:
        await self.plugins.unload(instance_id)
        self.reread()
        await self.rebuild_providers()
