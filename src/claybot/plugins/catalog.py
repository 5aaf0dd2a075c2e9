"""The plugins this engine can load: every one declared in the ``claybot.plugins`` group.

A package announces its plugin with an entry point in that group, pointing at a
``PluginDefinition`` or at a zero-argument callable returning one::

    [project.entry-points."claybot.plugins"]
    weather = "claybot_weather:definition"

The built-in plugins are declared the same way, in ClayBot's own ``pyproject.toml``;
what makes them built-in is only that the ``claybot`` distribution declares them,
so they are listed first and keep their ids against a third-party clash.

One broken package must not take the others (or the engine) down with it, so every
failure (an unreadable ``entry_points.txt``, an import error, a wrong target, an id
already taken) is logged with its reason and kept in ``problems``, and the rest load.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import Distribution, EntryPoint, distributions
from typing import Any, TypedDict

from claybot.config.redaction import redact_value
from claybot.config.settings import PluginInstanceSettings
from claybot.plugin_api.definition import PluginDefinition

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "claybot.plugins"
OWN_DISTRIBUTION = "claybot"

DistributionSource = Callable[[], Iterable[Distribution]]


class ConfiguredEntry(TypedDict):
    """A settings.json entry as listings show it (``wire.plugins.ConfiguredPlugin``)."""

    instanceId: str
    pluginId: str
    enabled: bool
    settings: dict[str, Any]  # the plugin's own settings, secrets redacted


class CatalogEntry(TypedDict):
    """An installed plugin as listings show it (``wire.plugins.CatalogPlugin``)."""

    id: str
    name: str
    description: str
    exclusive: bool
    settingsSchema: dict[str, Any] | None  # a JSON schema
    builtin: bool


@dataclass(frozen=True)
class CatalogProblem:
    source: str  # "entry point name = module:attr (distribution version)", or what was unreadable
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "message": self.message}


@dataclass(frozen=True)
class DeclaredPlugin:
    entry_point: EntryPoint
    builtin: bool  # declared by ClayBot's own distribution


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _describe(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    owner = f" ({dist.name} {dist.version})" if dist is not None else ""
    return f"{entry_point.name} = {entry_point.value}{owner}"


def _where(dist: Distribution) -> str:
    """A damaged distribution, as far as it can still be named."""
    try:
        return f"distribution {dist.name!r} in {dist.locate_file('')}"
    except Exception:
        return f"distribution {dist!r}"


def _definition_from(entry_point: EntryPoint) -> PluginDefinition[Any]:
    target = entry_point.load()
    if isinstance(target, PluginDefinition):
        return target
    if callable(target):
        made = target()
        if isinstance(made, PluginDefinition):
            return made
        raise TypeError(f"the callable returned {type(made).__name__}, not a PluginDefinition")
    raise TypeError(f"it points at {type(target).__name__}, not a PluginDefinition")


class PluginCatalog:
    def __init__(
        self,
        builtins: Iterable[PluginDefinition[Any]] = (),
        third_party: Iterable[PluginDefinition[Any]] = (),
    ) -> None:
        self._definitions: dict[str, PluginDefinition[Any]] = {}
        self._builtin_ids: set[str] = set()
        self.problems: list[CatalogProblem] = []
        for definition in builtins:
            if definition.id in self._definitions:
                raise ValueError(f"two built-in plugins share the id {definition.id!r}")
            self._definitions[definition.id] = definition
            self._builtin_ids.add(definition.id)
        for definition in third_party:
            self.add(definition, source=definition.id)

    @classmethod
    def discover(cls, *, source: DistributionSource = distributions) -> PluginCatalog:
        """Every plugin the installed distributions declare: ClayBot's own first."""
        catalog = cls()
        try:
            declared = catalog._declared(source())
        except Exception as exc:  # e.g. an unreadable folder on sys.path
            catalog._problem("entry points", f"could not list installed plugins: {exc}")
            return catalog
        # Stable: within each kind, sys.path order, as the distributions were found.
        for plugin in sorted(declared, key=lambda plugin: not plugin.builtin):
            described = _describe(plugin.entry_point)
            try:
                definition = _definition_from(plugin.entry_point)
            except (Exception, SystemExit) as exc:
                catalog._problem(described, f"{type(exc).__name__}: {exc}")
                continue
            catalog.add(definition, source=described, builtin=plugin.builtin)
        return catalog

    def _declared(self, found: Iterable[Distribution]) -> list[DeclaredPlugin]:
        """The group's entry points, read one distribution at a time.

        ``importlib.metadata.entry_points()`` fails as a whole when one installed
        package has a damaged ``entry_points.txt``; read separately, that package is a
        problem and the others (the built-ins among them) still load. Only a distribution
        that declares plugins has its name read (parsing every METADATA costs ~45 ms of
        each start): of two copies of one name, the first on sys.path wins, as for imports.
        """
        declared: list[DeclaredPlugin] = []
        seen: set[str] = set()
        for dist in found:
            try:
                entry_points = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
                if not entry_points:
                    continue
                name = _normalized(dist.name or "")
            except Exception as exc:
                self._problem(_where(dist), f"its entry points are unreadable: {exc}")
                continue
            if name and name in seen:
                continue
            seen.add(name)
            builtin = name == OWN_DISTRIBUTION
            declared += [DeclaredPlugin(ep, builtin) for ep in entry_points]
        return declared

    def add(self, definition: PluginDefinition[Any], *, source: str, builtin: bool = False) -> bool:
        """Add a definition; an id already taken is a problem, and the first wins."""
        existing = self._definitions.get(definition.id)
        if existing is not None:
            if existing is not definition:
                owner = "a built-in plugin" if definition.id in self._builtin_ids else "another"
                self._problem(
                    source, f"plugin id {definition.id!r} is already provided by {owner}; ignored"
                )
            return False
        self._definitions[definition.id] = definition
        if builtin:
            self._builtin_ids.add(definition.id)
        return True

    def _problem(self, source: str, message: str) -> None:
        log.warning(
            "plugin %s not available: %s; reinstall or remove the package",
            source,
            message,
            extra={"action": "plugin.catalog_problem", "source": source},
        )
        self.problems.append(CatalogProblem(source, message))

    def get(self, plugin_id: str) -> PluginDefinition[Any] | None:
        return self._definitions.get(plugin_id)

    def ids(self) -> list[str]:
        return sorted(self._definitions)

    def definitions(self) -> list[PluginDefinition[Any]]:
        return [self._definitions[plugin_id] for plugin_id in self.ids()]

    def is_builtin(self, plugin_id: str) -> bool:
        return plugin_id in self._builtin_ids

    def public_entry(self, entry: PluginInstanceSettings) -> ConfiguredEntry:
        """A settings.json entry as listings show it: its settings' secrets redacted."""
        definition = self.get(entry.plugin_id)
        # A plugin that is not installed has no model to say which values are secret.
        settings = (
            definition.public_settings(entry.settings)
            if definition is not None
            else redact_value(entry.settings)
        )
        return {
            "instanceId": entry.instance_id,
            "pluginId": entry.plugin_id,
            "enabled": entry.enabled,
            "settings": settings,
        }

    def describe(self) -> list[CatalogEntry]:
        return [
            {
                "id": definition.id,
                "name": definition.name,
                "description": definition.description,
                "exclusive": definition.exclusive,
                "settingsSchema": definition.settings_schema(),
                "builtin": self.is_builtin(definition.id),
            }
            for definition in self.definitions()
        ]
