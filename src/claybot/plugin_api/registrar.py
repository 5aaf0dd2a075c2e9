"""What one plugin instance registers, so that unloading it undoes exactly that.

Registrations never replace what is already there: a clash is a
``RegistrationError`` naming the owner-visible id, and the load that caused it
fails cleanly instead of silently taking over another instance's tool or
provider.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, assert_never

from claybot.connectors.base import Connector
from claybot.plugin_api.errors import RegistrationError
from claybot.plugin_api.registries import (
    ConnectorRegistry,
    ImageProviderRegistry,
    Registries,
)
from claybot.providers.base import ImageProvider, ProviderType
from claybot.tools.base import ToolDefinition

# Re-exported: callers import the registries from either module.
__all__ = [
    "ConnectorRegistry",
    "ImageProviderRegistry",
    "PluginRegistrar",
    "Registration",
    "Registries",
]

RegistrationKind = Literal["connector", "tool", "inference_provider", "image_provider"]


@dataclass(frozen=True)
class Registration:
    kind: RegistrationKind
    key: str


class PluginRegistrar:
    def __init__(
        self,
        registries: Registries,
        *,
        instance_id: str,
        plugin_id: str,
        plugin_name: str,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._registries = registries
        self.instance_id = instance_id
        self.plugin_id = plugin_id
        self.plugin_name = plugin_name
        self._now = now
        self._registered: list[Registration] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once the instance is unloaded; a late registration is refused."""
        return self._closed

    def registrations(self) -> list[Registration]:
        return list(self._registered)

    def _check_open(self) -> None:
        if self._closed:
            raise RegistrationError(
                f"plugin instance {self.instance_id!r} is unloaded and can no longer register"
            )

    def register_connector(self, connector: Connector) -> None:
        self._check_open()
        # The connector id is what messages carry and replies are routed by; it must
        # be the instance id, or two instances of one plugin would answer for each other.
        if connector.id != self.instance_id:
            raise RegistrationError(
                f"connector id {connector.id!r} must be the plugin instance id {self.instance_id!r}"
            )
        try:
            self._registries.connectors.register(
                connector, plugin_id=self.plugin_id, name=self.plugin_name, loaded_at=self._now()
            )
        except ValueError as exc:
            raise RegistrationError(str(exc)) from exc
        self._registered.append(Registration("connector", connector.id))

    def register_tool(self, tool: ToolDefinition[Any]) -> None:
        self._check_open()
        try:
            self._registries.tools.register(tool)
        except ValueError as exc:
            raise RegistrationError(str(exc)) from exc
        self._registered.append(Registration("tool", tool.name))

    def register_inference_provider(self, provider_type: ProviderType) -> None:
        self._check_open()
        # ProviderRegistry.register replaces silently; a plugin must not take over
        # a built-in type such as "openai".
        if self._registries.providers.get(provider_type.type) is not None:
            raise RegistrationError(
                f"an inference provider type {provider_type.type!r} is already registered"
            )
        self._registries.providers.register(provider_type)
        self._registered.append(Registration("inference_provider", provider_type.type))

    def register_image_provider(self, provider: ImageProvider) -> None:
        self._check_open()
        try:
            self._registries.images.register(provider)
        except ValueError as exc:
            raise RegistrationError(str(exc)) from exc
        self._registered.append(Registration("image_provider", provider.id))

    def unregister_connector(self, connector_id: str) -> None:
        self._unregister(Registration("connector", connector_id))

    def unregister_tool(self, name: str) -> None:
        self._unregister(Registration("tool", name))

    def unregister_inference_provider(self, type_name: str) -> None:
        self._unregister(Registration("inference_provider", type_name))

    def unregister_image_provider(self, provider_id: str) -> None:
        self._unregister(Registration("image_provider", provider_id))

    def unregister_all(self) -> None:
        """Undo every registration of this instance (newest first) and refuse new ones."""
        self._closed = True
        for registration in reversed(self._registered):
            self._remove(registration)
        self._registered.clear()

    def _unregister(self, registration: Registration) -> None:
        # Only what this instance registered itself may be removed through it.
        if registration in self._registered:
            self._registered.remove(registration)
            self._remove(registration)

    def _remove(self, registration: Registration) -> None:
        match registration.kind:
            case "connector":
                self._registries.connectors.unregister(registration.key)
            case "tool":
                self._registries.tools.unregister(registration.key)
            case "inference_provider":
                self._registries.providers.unregister(registration.key)
            case "image_provider":
                self._registries.images.unregister(registration.key)
            case _:
                assert_never(registration.kind)
