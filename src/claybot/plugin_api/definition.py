"""What a plugin is: a definition the catalog lists and an instance the manager runs.

A plugin module exposes a ``PluginDefinition``; it registers nothing when it is
imported. The manager validates settings with ``settings_model``, calls
``create(api)`` and awaits ``load()``; ``unload()`` undoes what ``load()`` did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, runtime_checkable

from pydantic import BaseModel
from typing_extensions import TypedDict

from claybot.config.redaction import public_settings
from claybot.plugin_api.api import PluginApi, S

PLUGIN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PLUGIN_ID_MAX_LENGTH = 64


@runtime_checkable
class PluginInstance(Protocol):
    async def load(self) -> None:
        """Start: register connectors, tools or providers through the api's registrar.

        Raise ``PluginNotReady``, ``PluginAuthFailed`` or ``PluginSettingsInvalid``
        to say why the instance cannot start. If ``load`` raises (or times out),
        the manager removes whatever it registered and then calls ``unload`` once,
        so ``unload`` must cope with a half-finished ``load``.
        """
        ...

    async def unload(self) -> None:
        """Stop what ``load`` started (tasks, connections, connectors)."""
        ...


class PluginDescription(TypedDict):
    """A plugin as the catalog lists it."""

    id: str
    name: str
    description: str
    exclusive: bool
    settingsSchema: dict[str, Any] | None  # None: the model has no JSON schema


@dataclass(frozen=True)
class PluginDefinition(Generic[S]):
    id: str
    name: str
    description: str
    settings_model: type[S]
    create: Callable[[PluginApi[S]], PluginInstance]
    # An exclusive plugin is the only plugin instance the engine may run.
    exclusive: bool = False

    def __post_init__(self) -> None:
        if len(self.id) > PLUGIN_ID_MAX_LENGTH or not PLUGIN_ID_PATTERN.match(self.id):
            raise ValueError(
                f"plugin id {self.id!r} must be 1-{PLUGIN_ID_MAX_LENGTH} letters, digits, "
                "'.', '_' or '-', starting with a letter or digit"
            )
        if not (
            isinstance(self.settings_model, type) and issubclass(self.settings_model, BaseModel)
        ):
            raise TypeError(f"plugin {self.id!r}: settings_model must be a pydantic model class")
        if not callable(self.create):
            raise TypeError(f"plugin {self.id!r}: create must be callable")

    def settings_schema(self) -> dict[str, Any] | None:
        """The settings model's JSON schema (by alias), or None when it has none. A dict:
        a JSON Schema document is arbitrary JSON."""
        try:
            return self.settings_model.model_json_schema(by_alias=True)
        except Exception:  # a third-party model without a JSON schema must not break listings
            return None

    def public_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Stored settings as they may be shown: the secrets its model marks, or whose
        names say so, redacted. A dict: its keys are the plugin's own settings model's,
        which ClayBot does not know."""
        view: dict[str, Any] = public_settings(self.settings_model, settings)
        return view

    def describe(self) -> PluginDescription:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "exclusive": self.exclusive,
            "settingsSchema": self.settings_schema(),
        }
