"""Changing which providers the engine uses: settings.json's list in priority order.

The one service behind the API's provider routes, the CLI (through the API) and the
dashboard's Providers page: every change writes settings.json through the engine's
configuration, which rebuilds the live providers, and answers with the list as it is
now and which providers could not be built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from claybot.config.auth import AuthFile
from claybot.config.settings import ProviderSettings, Settings
from claybot.kernel.errors import ClayError, NotFound
from claybot.providers.base import ProviderType
from claybot.providers.configured import ConfiguredProviders
from claybot.providers.probe import ProbeResult, probe
from claybot.providers.registry import DEFAULT_PROVIDER, with_provider

__all__ = [
    "ProviderAdmin",
    "ProviderNotFound",
    "ProviderRow",
    "Providers",
    "SettingsKeeper",
    "UnknownProviderType",
]


class SettingsKeeper(Protocol):
    """Where settings.json and auth.json are read and written (the engine's live
    configuration: a write rebuilds the providers)."""

    @property
    def settings(self) -> Settings: ...

    async def update_settings(self, settings: Settings) -> None: ...

    def read_auth(self) -> AuthFile: ...


class ProviderNotFound(NotFound):
    code = "provider_not_found"

    def __init__(self, provider_id: str) -> None:
        super().__init__(f"no provider with id {provider_id!r}", field="providerId")


class UnknownProviderType(ClayError):
    code = "unknown_provider_type"

    def __init__(self, provider_type: str, known: list[str]) -> None:
        super().__init__(
            f"unknown provider type {provider_type!r} (known: {', '.join(known)})", field="type"
        )


@dataclass(frozen=True)
class ProviderRow:
    """One configured provider with the state the engine reports for it."""

    settings: ProviderSettings
    label: str  # the live provider's label ("" when it is not built)
    state: Literal["ready", "not built", "disabled"]
    problem: str  # why it is not built


@dataclass(frozen=True)
class Providers:
    """settings.json's providers in priority order, and those that could not be built
    (id -> why) when they were last built."""

    settings: list[ProviderSettings]
    failures: dict[str, str]


ProviderChange = Callable[[list[ProviderSettings], ProviderSettings], list[ProviderSettings]]


class ProviderAdmin:
    def __init__(
        self, keeper: SettingsKeeper, live: ConfiguredProviders, env: Mapping[str, str]
    ) -> None:
        self._keeper = keeper
        self._live = live
        self._env = env

    def current(self) -> Providers:
        return Providers(list(self._keeper.settings.providers), dict(self._live.failures))

    def types(self) -> list[ProviderType]:
        """The provider types that can be configured (built-in and plugins'), in the
        order they were registered (the API's order, and the CLI's without an engine)."""
        return self._live.registry.types()

    def rows(self) -> list[ProviderRow]:
        labels = {provider.id: provider.label for provider in self._live.router.providers}
        failures = self._live.failures
        rows = []
        for provider in self._keeper.settings.providers:
            if not provider.enabled:
                rows.append(ProviderRow(provider, labels.get(provider.id, ""), "disabled", ""))
            elif provider.id in failures:
                rows.append(ProviderRow(provider, "", "not built", failures[provider.id]))
            else:
                rows.append(ProviderRow(provider, labels.get(provider.id, ""), "ready", ""))
        return rows

    async def put(self, provider: ProviderSettings, position: int | None = None) -> Providers:
        """Add ``provider`` or replace the one with its id, at ``position`` (or where the
        one it replaces was, else last); UnknownProviderType if no type is registered
        under its ``type``."""
        if self._live.registry.get(provider.provider_type) is None:
            known = sorted(kind.type for kind in self._live.registry.types())
            raise UnknownProviderType(provider.provider_type, known)
        return await self._place(provider, position)

    async def enable(self, provider_id: str, enabled: bool) -> Providers:
        def change(
            providers: list[ProviderSettings], chosen: ProviderSettings
        ) -> list[ProviderSettings]:
            chosen.enabled = enabled
            return providers

        return await self._change(provider_id, change)

    async def remove(self, provider_id: str) -> Providers:
        return await self._change(
            provider_id, lambda providers, chosen: [p for p in providers if p is not chosen]
        )

    async def make_default(self, provider_id: str) -> Providers:
        return await self._change(
            provider_id,
            lambda providers, chosen: [chosen, *(p for p in providers if p is not chosen)],
        )

    async def move(self, provider_id: str, step: Literal[-1, 1]) -> Providers:
        """One place earlier (-1) or later (1) in the priority order."""
        current = self._keeper.settings.providers
        index = next((i for i, p in enumerate(current) if p.id == provider_id), None)
        if index is None:
            raise ProviderNotFound(provider_id)
        # Not put: a provider whose type a plugin took away can still be moved (or removed).
        return await self._place(current[index].model_copy(deep=True), max(index + step, 0))

    async def test(self, provider_id: str) -> ProbeResult:
        """One small real call to a provider (the live one when it is built)."""
        settings = self._keeper.settings
        chosen = next((p for p in settings.providers if p.id == provider_id), None)
        if chosen is None and provider_id == DEFAULT_PROVIDER.id and not settings.providers:
            chosen = DEFAULT_PROVIDER  # the one the engine uses when none is configured
        if chosen is None:
            raise ProviderNotFound(provider_id)
        live = next((p for p in self._live.router.providers if p.id == provider_id), None)
        auth = self._keeper.read_auth().get(chosen.id)
        return await probe(chosen, auth, self._env, self._live.registry, live)

    async def _place(self, provider: ProviderSettings, position: int | None) -> Providers:
        settings = self._keeper.settings.model_copy(deep=True)
        settings.providers = with_provider(settings.providers, provider, position)
        return await self._write(settings)

    async def _change(self, provider_id: str, change: ProviderChange) -> Providers:
        """settings.json's providers as ``change`` leaves them, given the one named
        (ProviderNotFound if there is none)."""
        settings = self._keeper.settings.model_copy(deep=True)
        chosen = next((p for p in settings.providers if p.id == provider_id), None)
        if chosen is None:
            raise ProviderNotFound(provider_id)
        settings.providers = change(settings.providers, chosen)
        return await self._write(settings)

    async def _write(self, settings: Settings) -> Providers:
        await self._keeper.update_settings(settings)
        return self.current()
