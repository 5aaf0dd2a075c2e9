"""Provider types by name, and building the configured providers from settings.

A registry instead of an if/elif chain: plugins add provider types the same way
the built-ins do. Vendor SDKs are imported inside the factories, so an engine that
never uses a provider never pays for importing its SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import InferenceProvider, ProviderConfigError, ProviderType

# Used when settings.json configures no provider at all: the engine still answers,
# with no key and no network.
DEFAULT_PROVIDER = ProviderSettings(id="local")


def with_provider(
    providers: list[ProviderSettings], provider: ProviderSettings, position: int | None
) -> list[ProviderSettings]:
    """``providers`` with ``provider`` added (or replacing the one with its id).

    The local model stays the last fallback: adding the first provider to a list that
    is empty (the engine then uses ``local`` implicitly) keeps ``local`` explicitly,
    after it; and without a ``position`` a provider goes before the local ones at the
    end. Only removing ``local`` (or disabling it) takes it out of the order.
    """
    others = [p for p in providers if p.id != provider.id]
    if not providers and provider.provider_type != DEFAULT_PROVIDER.provider_type:
        others = [DEFAULT_PROVIDER.model_copy()]
    if position is None:
        position = len(others)
        while position and others[position - 1].provider_type == "local":
            position -= 1
    position = min(position, len(others))
    return [*others[:position], provider, *others[position:]]


class ProviderRegistry:
    def __init__(self, types: Iterable[ProviderType] = ()) -> None:
        self._types: dict[str, ProviderType] = {}
        for provider_type in types:
            self.register(provider_type)

    def register(self, provider_type: ProviderType) -> None:
        self._types[provider_type.type] = provider_type

    def unregister(self, type_name: str) -> None:
        self._types.pop(type_name, None)

    def get(self, type_name: str) -> ProviderType | None:
        return self._types.get(type_name)

    def types(self) -> list[ProviderType]:
        return list(self._types.values())

    def create(
        self, settings: ProviderSettings, auth: AuthEntry | None, env: Mapping[str, str]
    ) -> InferenceProvider:
        provider_type = self._types.get(settings.provider_type)
        if provider_type is None:
            known = ", ".join(sorted(self._types)) or "none"
            raise ProviderConfigError(
                settings.id, f"unknown provider type {settings.provider_type!r} (known: {known})"
            )
        return provider_type.create(settings, auth, env)


def builtin_provider_types() -> list[ProviderType]:
    # Each module imports its vendor SDK inside the factory, so listing them is cheap.
    from claybot.providers.anthropic_provider import PROVIDER_TYPE as anthropic
    from claybot.providers.local import PROVIDER_TYPE as local
    from claybot.providers.openai_provider import PROVIDER_TYPE as openai
    from claybot.providers.scripted import PROVIDER_TYPE as scripted

    return [scripted, openai, anthropic, local]
