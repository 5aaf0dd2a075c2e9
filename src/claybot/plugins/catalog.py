"""The plugins this engine can load: built-ins plus installed third-party packages.

A third-party package announces its plugin with an entry point in the
``claybot.plugins`` group, pointing at a ``PluginDefinition`` or at a zero-argument
callable returning one::

    [project.entry-points."claybot.plugins"]
    weather = "claybot_weather:definition"

One broken package must not take the others (or the engine) down with it, so
every failure is logged and kept in ``problems`` for the status payload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from claybot.config.redaction import redact_value
from claybot.config.settings import PluginInstanceSettings
from claybot.plugins.definition import PluginDefinition

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "claybot.plugins"

EntryPointSource = Callable[[], Iterable[EntryPoint]]


@dataclass(frozen=True)
class CatalogProblem:
    source: str  # "entry point name = module:attr (distribution)" or "builtin"
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "message": self.message}


def _installed_entry_points() -> Iterable[EntryPoint]:
    return entry_points(group=ENTRY_POINT_GROUP)


def _describe(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    owner = f" ({dist.name} {dist.version})" if dist is not None else ""
    return f"{entry_point.name} = {entry_point.value}{owner}"


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
    def discover(
        cls,
        builtins: Iterable[PluginDefinition[Any]] | None = None,
        *,
        source: EntryPointSource = _installed_entry_points,
    ) -> PluginCatalog:
        """Built-ins (the shipped ones unless given) plus every installed entry point."""
        if builtins is None:
            from claybot.plugins.builtin import builtin_definitions

            builtins = builtin_definitions()
        catalog = cls(builtins)
        try:
            found = list(source())
        except Exception as exc:  # a corrupt installed METADATA must not stop the engine
            catalog._problem("entry points", f"could not list installed plugins: {exc}")
            return catalog
        for entry_point in found:
            described = _describe(entry_point)
            try:
                definition = _definition_from(entry_point)
            except (Exception, SystemExit) as exc:
                catalog._problem(described, f"{type(exc).__name__}: {exc}")
                continue
            catalog.add(definition, source=described)
        return catalog

    def add(self, definition: PluginDefinition[Any], *, source: str) -> bool:
        """Add a third-party definition; an id already taken is a problem, and the first wins."""
        existing = self._definitions.get(definition.id)
        if existing is not None:
            if existing is not definition:
                owner = "a built-in plugin" if definition.id in self._builtin_ids else "another"
                self._problem(
                    source, f"plugin id {definition.id!r} is already provided by {owner}; ignored"
                )
            return False
        self._definitions[definition.id] = definition
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

    def public_entry(self, entry: PluginInstanceSettings) -> dict[str, Any]:
        """A settings.json entry as listings show it: its settings' secrets redacted."""
        definition = self.get(entry.plugin_id)
        # A plugin that is not installed has no model to say which values are secret.
        settings = (
            definition.public_settings(entry.settings)
            if definition is not None
            else redact_value(entry.settings)
        )
        return {**entry.to_json_dict(), "settings": settings}

    def describe(self) -> list[dict[str, Any]]:
        return [
            {**definition.describe(), "builtin": self.is_builtin(definition.id)}
            for definition in self.definitions()
        ]
