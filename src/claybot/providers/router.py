"""Try the enabled providers in priority order; a failing one falls through.

The providers are swapped whole when settings change (``replace``). A call runs over
the list it started with to its end, fall-throughs included: the list it pinned is
closed only once its last call ends. Closing at once made a turn resumed at start,
streaming from the first list while the second was built, fail with "cannot reach"
and answer from the next provider instead of the one the user configured.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.providers.base import (
    InferenceProvider,
    InferenceRequest,
    InferenceResult,
    failure_reason,
)
from claybot.providers.metering import UNMETERED, CallMeter

log = logging.getLogger(__name__)


class InferenceFailed(Exception):
    """Every provider failed; ``failures`` says why, one entry per provider.

    Providers that could not even be built (no API key, a bad option) are listed too:
    "no API key" is what the user must hear, not "no provider is configured".
    """

    def __init__(
        self, failures: list[tuple[str, str]], unavailable: Mapping[str, str] | None = None
    ) -> None:
        reasons = [*failures, *(unavailable or {}).items()]
        detail = "; ".join(f"{pid}: {why}" for pid, why in reasons) or "no provider is configured"
        super().__init__(f"inference failed ({detail})")
        self.failures = failures


@functools.cache
def _takes_delta_sink(provider_class: type[InferenceProvider]) -> bool:
    try:
        parameters = inspect.signature(provider_class.complete).parameters
    except (TypeError, ValueError):
        return False
    return len(parameters) > 2  # self, request, on_delta


def streams(provider: InferenceProvider) -> bool:
    """Whether ``provider.complete`` takes a delta sink: a provider type a plugin wrote
    before streaming existed takes only the request, and still answers."""
    return _takes_delta_sink(type(provider))


class CallObserver(Protocol):
    """Who watches one call: the text as it streams, and each fall-through."""

    def delta(self, text: str) -> None: ...

    def fallback(self, failed: str, next_provider: str, reason: str) -> None:
        """``failed`` gave up with ``reason``; text it streamed is void."""
        ...


class _Generation:
    """One list of providers, and how many calls run over it."""

    __slots__ = ("calls", "providers", "retired")

    def __init__(self, providers: Sequence[InferenceProvider]) -> None:
        self.providers = list(providers)
        self.calls = 0
        self.retired = False


class InferenceRouter:
    def __init__(
        self,
        providers: Sequence[InferenceProvider],
        events: EventBus | None = None,
        meter: CallMeter = UNMETERED,
    ) -> None:
        self._generation = _Generation(providers)
        # Retired lists still carrying calls: closed when the last one ends.
        self._retiring: set[_Generation] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self.meter = meter  # told of each provider call: how long, whether it failed
        # Providers that could not be built, with why (set with ``replace``).
        self.unavailable: dict[str, str] = {}
        self._events = events  # where a fall-through no observer watches is told

    async def complete(
        self,
        request: InferenceRequest,
        observer: CallObserver | None = None,
        *,
        prefer: str | None = None,
    ) -> InferenceResult:
        """The first answer of the providers in order; with an ``observer``, streamed.

        ``prefer`` names a provider (its id or its model) to try first.
        """
        generation = self._generation
        generation.calls += 1
        try:
            return await self._complete(generation.providers, request, observer, prefer)
        finally:
            generation.calls -= 1
            if generation.retired and generation.calls == 0:
                self._retiring.discard(generation)
                task = asyncio.get_running_loop().create_task(
                    self._close_providers(generation.providers)
                )
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    @property
    def providers(self) -> list[InferenceProvider]:
        """The providers a call starting now goes through, in order."""
        return self._generation.providers

    async def _complete(
        self,
        providers: list[InferenceProvider],
        request: InferenceRequest,
        observer: CallObserver | None,
        prefer: str | None,
    ) -> InferenceResult:
        if prefer is not None:
            named = [p for p in providers if prefer in (p.id, p.model)]
            providers = [*named, *(p for p in providers if p not in named)]
        failures: list[tuple[str, str]] = []
        on_delta = observer.delta if observer is not None else None
        meter = self.meter
        for position, provider in enumerate(providers):
            # Timed here rather than by a wrapping coroutine: every turn passes this. A
            # cancelled call (a stopped turn, a shutdown) is not the provider's doing: a
            # CancelledError is no Exception, and passes uncounted.
            started = time.perf_counter()
            try:
                if on_delta is None or not streams(provider):
                    result = await provider.complete(request)
                else:
                    result = await provider.complete(request, on_delta)
            except Exception as exc:  # any provider failure means: try the next one
                meter.provider_called(provider.id, time.perf_counter() - started, failed=True)
                reason = failure_reason(exc)
                failures.append((provider.id, reason))
                following = providers[position + 1] if position + 1 < len(providers) else None
                self._fell_through(provider.id, following, reason, observer)
                continue
            meter.provider_called(provider.id, time.perf_counter() - started, failed=False)
            return result
        raise InferenceFailed(failures, self.unavailable)

    def _fell_through(
        self,
        failed: str,
        following: InferenceProvider | None,
        reason: str,
        observer: CallObserver | None,
    ) -> None:
        then = f"trying {following.id}" if following is not None else "no provider left"
        log.warning(
            "provider %s failed (%s); %s",
            failed,
            reason,
            then,
            extra={"action": "inference.fallthrough", "provider": failed, "reason": reason},
        )
        if following is None:
            return
        if observer is not None:
            observer.fallback(failed, following.id, reason)
        elif self._events is not None:
            self._events.emit(
                EventType.PROVIDER_FALLBACK,
                {
                    "from": failed,
                    "to": following.id,
                    "reason": reason,
                    "agentId": None,
                    "messageId": None,
                },
            )

    async def replace(
        self,
        providers: Sequence[InferenceProvider],
        unavailable: Mapping[str, str] | None = None,
    ) -> None:
        """Route to ``providers`` from now on, and close the previous ones: at once if
        no call runs over them, else when the last call that started with them ends.

        ``unavailable``: the configured providers that could not be built, and why.
        """
        old, self._generation = self._generation, _Generation(providers)
        self.unavailable = dict(unavailable or {})
        kept = {id(provider) for provider in self._generation.providers}
        old.providers = [provider for provider in old.providers if id(provider) not in kept]
        if old.calls:
            old.retired = True
            self._retiring.add(old)
        else:
            await self._close_providers(old.providers)

    @staticmethod
    async def _close_providers(providers: Sequence[InferenceProvider]) -> None:
        for provider in providers:
            try:
                await provider.close()
            except Exception:  # one that fails to close must not keep the others open
                log.exception(
                    "closing provider %s failed",
                    provider.id,
                    extra={"action": "provider.close_failed", "provider": provider.id},
                )

    async def close(self) -> None:
        """Close every provider, those still finishing calls of an earlier list too."""
        generations = [self._generation, *self._retiring]
        self._retiring.clear()
        for generation in generations:
            generation.retired = False  # closed here, not again when their calls end
            await self._close_providers(generation.providers)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class PreferringRouter:
    """The router's providers with the one ``name`` names (its id or its model) tried
    first: how a job's ``model`` picks a provider. A name no provider has changes
    nothing (seed 002's default model names a vendor ClayBot may not have). It reads
    the router's providers at each call, so a rebuild of the providers reaches it."""

    def __init__(self, router: InferenceRouter, name: str) -> None:
        self._router = router
        self._name = name

    async def complete(
        self, request: InferenceRequest, observer: CallObserver | None = None
    ) -> InferenceResult:
        return await self._router.complete(request, observer, prefer=self._name)


def router_for(router: InferenceRouter, name: str | None) -> InferenceRouter | PreferringRouter:
    return router if not name else PreferringRouter(router, name)
