"""Try the enabled providers in priority order; a failing one falls through."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from claybot.providers.base import InferenceProvider, InferenceRequest, InferenceResult

log = logging.getLogger(__name__)


class InferenceFailed(Exception):
    """Every provider failed; ``failures`` says why, one entry per provider."""

    def __init__(self, failures: list[tuple[str, str]]) -> None:
        detail = "; ".join(f"{pid}: {why}" for pid, why in failures) or "no provider is configured"
        super().__init__(f"inference failed ({detail})")
        self.failures = failures


class InferenceRouter:
    def __init__(self, providers: Sequence[InferenceProvider]) -> None:
        self.providers = list(providers)

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        failures: list[tuple[str, str]] = []
        for provider in self.providers:
            try:
                return await provider.complete(request)
            except Exception as exc:  # any provider failure means: try the next one
                failures.append((provider.id, str(exc) or type(exc).__name__))
                log.warning(
                    "provider failed, trying the next one",
                    extra={"action": "inference.fallthrough", "provider": provider.id},
                )
        raise InferenceFailed(failures)

    def replace(self, providers: Sequence[InferenceProvider]) -> list[InferenceProvider]:
        """Route to ``providers`` from now on; returns the previous ones, to close.

        A call already under way finishes over the list it started with.
        """
        old, self.providers = self.providers, list(providers)
        return old

    async def close(self) -> None:
        for provider in self.providers:
            await provider.close()


class PreferringRouter:
    """The router's providers with the one ``name`` names (its id or its model) tried
    first: how a job's ``model`` picks a provider. A name no provider has changes
    nothing (seed 002's default model names a vendor ClayBot may not have). It reads
    the router's providers at each call, so a rebuild of the providers reaches it."""

    def __init__(self, router: InferenceRouter, name: str) -> None:
        self._router = router
        self._name = name

    async def complete(self, request: InferenceRequest) -> InferenceResult:
        providers = self._router.providers
        named = [p for p in providers if self._name in (p.id, p.model)]
        rest = [p for p in providers if p not in named]
        return await InferenceRouter([*named, *rest]).complete(request)


def router_for(router: InferenceRouter, name: str | None) -> InferenceRouter | PreferringRouter:
    return router if not name else PreferringRouter(router, name)
