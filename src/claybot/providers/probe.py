"""``providers test``: one small real call to one provider, and what came of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

from claybot.config.auth import AuthEntry
from claybot.config.settings import ProviderSettings
from claybot.providers.base import (
    InferenceProvider,
    InferenceRequest,
    UserMessage,
    failure_reason,
)
from claybot.providers.registry import ProviderRegistry

PROBE = InferenceRequest(
    [UserMessage("Reply with one short sentence: are you there?")],
    max_output_tokens=32,
)
PROBE_TIMEOUT_S = 120.0  # the local model loads on its first call


@dataclass(frozen=True)
class ProbeResult:
    provider_id: str
    answered: bool
    answer: str  # the model's reply, when it answered
    reason: str  # why not, when it did not
    model: str
    latency_ms: float


async def probe(
    settings: ProviderSettings,
    auth: AuthEntry | None,
    env: Mapping[str, str],
    registry: ProviderRegistry,
    live: InferenceProvider | None = None,
) -> ProbeResult:
    """Call the provider ``settings`` describes: ``live`` (the engine's own instance)
    when there is one, else one built for this call and closed after it."""
    started = time.monotonic()

    def result(answered: bool, answer: str, reason: str, model: str) -> ProbeResult:
        elapsed = (time.monotonic() - started) * 1000
        return ProbeResult(settings.id, answered, answer, reason, model, round(elapsed, 1))

    provider = live
    if provider is None:
        try:
            provider = registry.create(settings, auth, env)
        except Exception as exc:  # no key, a bad option, an unknown type
            return result(False, "", failure_reason(exc), settings.model or "")
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            answer = await provider.complete(PROBE)
    except TimeoutError:
        return result(False, "", f"no answer in {PROBE_TIMEOUT_S:.0f}s", provider.model)
    except Exception as exc:  # the provider's own error, in its words
        return result(False, "", failure_reason(exc), provider.model)
    finally:
        if live is None:
            await provider.close()
    if not answer.text.strip():
        return result(False, "", "the model answered with no text", answer.model)
    return result(True, answer.text.strip(), "", answer.model or provider.model)
