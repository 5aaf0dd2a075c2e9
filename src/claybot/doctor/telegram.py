"""Each enabled Telegram instance: its bot token (auth.json) is accepted by the Bot API's
``getMe`` at the instance's ``baseUrl``. The token is in the request's path, so no
error shown here quotes the URL.

``check_bot_token`` is the probe itself; ``claybot init`` checks a token with it before
it saves anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx
from pydantic import ValidationError

from claybot.config.settings import PluginInstanceSettings
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok
from claybot.plugins.telegram.plugin import PLUGIN_ID as TELEGRAM_PLUGIN
from claybot.plugins.telegram.plugin import TelegramSettings
from claybot.providers.options import endpoint_of, redact

MAX_DESCRIPTION_CHARS = 200

# accepted: getMe answered with the bot; rejected: Telegram refused the token;
# unreachable: no answer at all; failing: an answer that is not about the token (a 5xx,
# a proxy's error page).
BotTokenVerdict = Literal["accepted", "rejected", "unreachable", "failing"]


@dataclass(frozen=True)
class BotTokenCheck:
    verdict: BotTokenVerdict
    detail: str  # never the token


def check_bot_token(base_url: str, token: str, timeout_s: float) -> BotTokenCheck:
    """Ask the Bot API at ``base_url`` (``…/bot``) whether it takes ``token`` (getMe)."""
    where = endpoint_of(base_url)
    try:
        with httpx.Client(timeout=timeout_s) as client:
            answer = client.get(f"{base_url}{token}/getMe")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # The exception's text may hold the URL, and with it the token: its type only.
        return BotTokenCheck(
            "unreachable", f"the Bot API at {where} does not answer ({type(exc).__name__})"
        )
    try:
        body = answer.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if answer.status_code == 200 and body.get("ok") is True:
        bot = body.get("result") or {}
        name = f"@{bot.get('username')}" if isinstance(bot, dict) else "the bot"
        return BotTokenCheck("accepted", f"the Bot API at {where} accepts the token: {name}")
    description = redact(str(body.get("description") or answer.reason_phrase), token)
    description = description[:MAX_DESCRIPTION_CHARS]
    if answer.status_code in (401, 404):  # the Bot API answers 404 to a malformed token
        return BotTokenCheck(
            "rejected", f"Telegram rejected the bot token ({answer.status_code} {description})"
        )
    return BotTokenCheck(
        "failing", f"the Bot API at {where} answered {answer.status_code}: {description}"
    )


def check_telegram(context: DoctorContext) -> list[Finding]:
    if context.settings is None:
        return []
    findings = []
    for entry in context.settings.plugins:
        if entry.enabled and entry.plugin_id == TELEGRAM_PLUGIN:
            findings.append(_instance(context, entry))
    return findings


def _instance(context: DoctorContext, entry: PluginInstanceSettings) -> Finding:
    check = f"telegram.{entry.instance_id}"
    set_token = f"claybot auth set {entry.instance_id} token"
    try:
        settings = TelegramSettings.model_validate(entry.settings)
    except ValidationError:
        return fail(
            check,
            "its settings are invalid (config.plugins says how)",
            f"claybot plugins info {TELEGRAM_PLUGIN}",
        )
    auth = context.auth.get(entry.instance_id) if context.auth is not None else None
    token = auth.secret("token") if auth is not None else None
    if not token:
        return fail(check, "no bot token in auth.json", set_token)
    found = check_bot_token(settings.base_url, token, context.limits.probe_timeout_s)
    if found.verdict == "accepted":
        return ok(check, found.detail)
    if found.verdict == "rejected":
        return fail(check, found.detail, set_token)
    if found.verdict == "unreachable":
        return fail(check, found.detail, "check the network, or the instance's baseUrl")
    return fail(check, found.detail, "try again later, or check the instance's baseUrl")
