"""The ``plugins`` list of settings.json, read and written through the config store."""

from __future__ import annotations

from claybot.config.settings import PluginInstanceSettings, Settings
from claybot.config.store import ConfigError, ConfigStore
from claybot.plugin_api.errors import SettingsFileError


class PluginSettingsFile:
    def __init__(self, config: ConfigStore) -> None:
        self._config = config

    def read(self) -> Settings:
        try:
            return self._config.read_settings()
        except ConfigError as exc:
            raise SettingsFileError(f"settings.json cannot be read: {exc.problem}") from exc

    def entries(self) -> list[PluginInstanceSettings]:
        return list(self.read().plugins)

    def entry(self, instance_id: str) -> PluginInstanceSettings | None:
        for entry in self.read().plugins:
            if entry.instance_id == instance_id:
                return entry
        return None

    def upsert(self, entry: PluginInstanceSettings) -> None:
        """Replace the entry with this instance id in place, or append it."""
        settings = self.read()
        plugins = list(settings.plugins)
        for index, current in enumerate(plugins):
            if current.instance_id == entry.instance_id:
                plugins[index] = entry
                break
        else:
            plugins.append(entry)
        settings.plugins = plugins
        try:
            self._config.write_settings(settings)
        except OSError as exc:
            raise SettingsFileError(f"settings.json cannot be written: {exc}") from exc
