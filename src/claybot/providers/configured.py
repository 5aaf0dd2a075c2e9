"""The providers settings.json enables, built and kept behind one router.

Rebuilt whenever settings, auth or the provider types change (a plugin may add
one). A provider that cannot be built (no key, a bad option) is reported in
``failures`` and left out; the others still serve.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from claybot.config.auth import AuthFile
from claybot.config.settings import Settings
from claybot.kernel.events import EventBus
from claybot.providers.base import InferenceProvider, failure_reason
from claybot.providers.metering import UNMETERED, CallMeter
from claybot.providers.registry import DEFAULT_PROVIDER, ProviderRegistry
from claybot.providers.router import InferenceRouter

log = logging.getLogger(__name__)


class ConfiguredProviders:
    def __init__(
        self,
        registry: ProviderRegistry,
        env: Mapping[str, str],
        events: EventBus | None = None,
        meter: CallMeter = UNMETERED,
    ) -> None:
        self.registry = registry
        self._env = env
        # One router for the engine's life: agents hold it, rebuilds swap what is inside.
        self.router = InferenceRouter([], events, meter)
        self.failures: dict[str, str] = {}

    async def rebuild(self, settings: Settings, auth: AuthFile) -> None:
        """Create the enabled providers in priority order; the old ones are retired."""
        providers: list[InferenceProvider] = []
        failures: dict[str, str] = {}
        for provider_settings in settings.enabled_providers() or [DEFAULT_PROVIDER]:
            try:
                providers.append(
                    self.registry.create(
                        provider_settings, auth.get(provider_settings.id), self._env
                    )
                )
            except Exception as exc:
                reason = failure_reason(exc)
                failures[provider_settings.id] = reason
                log.error(
                    "provider %s unavailable: %s",
                    provider_settings.id,
                    reason,
                    extra={
                        "action": "provider.unavailable",
                        "provider": provider_settings.id,
                        "reason": reason,
                    },
                )
        self.failures = failures
        # The old providers close once no call runs over them (see the router).
        await self.router.replace(providers, failures)

    async def close(self) -> None:
        await self.router.close()
