"""The checks ``claybot init`` makes before it saves anything.

A provider with a key gets one short real call, the one ``claybot providers test``
makes: the key, the model and the endpoint are checked together. The bot token goes
to the Bot API's ``getMe``, as the plugin does when it loads (and ``claybot doctor``
when it checks). The local model is not loaded here: that takes a while, needs no key
and no network, and ``claybot doctor`` checks it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from claybot.cli.init_plan import planned_provider
from claybot.cli.init_questions import TELEGRAM, CurrentSetup, ProviderAnswer, TelegramAnswer
from claybot.config.auth import AuthEntry

# getMe answers at once; a Bot API that has not answered in this long is unreachable.
BOT_CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    detail: str  # what answered, or why nothing did (never a secret)


def check_provider(
    current: CurrentSetup, answer: ProviderAnswer, env: Mapping[str, str]
) -> CheckResult:
    """One short call to the provider as the setup would save it."""
    from claybot.providers.probe import probe
    from claybot.providers.registry import ProviderRegistry, builtin_provider_types

    key = answer.key or current.secret(answer.id, "apiKey")
    auth = AuthEntry.model_validate({"type": "apiKey", "apiKey": key}) if key else None
    registry = ProviderRegistry(builtin_provider_types())
    outcome = asyncio.run(probe(planned_provider(current, answer), auth, env, registry))
    if outcome.answered:
        return CheckResult(True, f"{outcome.model} answered ({outcome.latency_ms:.0f} ms)")
    return CheckResult(False, outcome.reason)


def check_bot(current: CurrentSetup, answer: TelegramAnswer) -> CheckResult:
    """The Bot API's getMe with the token the setup would save."""
    from claybot.doctor.telegram import check_bot_token

    token = answer.token or current.secret(TELEGRAM, "token")
    assert token is not None, "a token is asked for when auth.json has none"
    found = check_bot_token(bot_api_url(current, answer), token, BOT_CHECK_TIMEOUT_S)
    return CheckResult(found.verdict == "accepted", found.detail)


def bot_api_url(current: CurrentSetup, answer: TelegramAnswer) -> str:
    from claybot.plugins.telegram.plugin import DEFAULT_BASE_URL

    return str(answer.settings(current).get("baseUrl") or DEFAULT_BASE_URL)
