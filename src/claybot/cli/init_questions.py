"""What ``claybot init`` asks, and the answers it gathers before it changes anything.

The sources of secrets (an environment variable, stdin, the command line, a hidden
prompt), the current setup a re-run starts from, and one function per question.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import typer
from rich.markup import escape

from claybot.cli.common import console, fail
from claybot.cli.questions import Questions
from claybot.config.home import HomePaths
from claybot.config.settings import PluginInstanceSettings, ProviderSettings

PROVIDER_CHOICES = ("openai", "anthropic", "local")
TELEGRAM = "telegram"  # the plugin, and the instance init configures
TOKEN_PATTERN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")  # what @BotFather hands out


def default_model(provider: str) -> str | None:
    from claybot.providers.anthropic_provider import DEFAULT_MODEL as ANTHROPIC
    from claybot.providers.openai_provider import DEFAULT_MODEL as OPENAI

    return {"openai": OPENAI, "anthropic": ANTHROPIC}.get(provider)


@dataclass(frozen=True)
class SecretSource:
    """Where a secret comes from: at most one of an environment variable, stdin, or the
    command line (which shell history and ``ps`` can show)."""

    what: str  # "the OpenAI API key", for messages
    env: str | None
    stdin: bool
    value: str | None
    flags: str  # "--api-key-env VAR or --api-key-stdin", for messages

    def given(self) -> bool:
        return self.env is not None or self.stdin or self.value is not None

    def check(self) -> None:
        if sum((self.env is not None, self.stdin, self.value is not None)) > 1:
            fail(f"give {self.what} one way only ({self.flags})")

    def read(self, questions: Questions, label: str) -> str | None:
        """The secret, or None when none was given and none can be asked for."""
        from claybot.cli.auth_cmds import read_secret

        if self.env is not None:
            value = os.environ.get(self.env, "")
            if not value:
                fail(f"{self.env} is not set (or is empty), so {self.what} cannot be read from it")
            return value
        if self.value is not None:
            return self.value
        if self.stdin or questions.interactive:
            return read_secret(label)  # hidden on a terminal, else a line of stdin
        return None


def parse_user_ids(raw: str) -> list[int]:
    ids: list[int] = []
    for part in re.split(r"[,\s]+", raw.strip()):
        if not part:
            continue
        if not part.isdigit() or int(part) <= 0:
            raise ValueError(
                f"{part!r} is not a Telegram user id: give numbers (@userinfobot tells yours)"
            )
        ids.append(int(part))
    if not ids:
        raise ValueError("give at least one Telegram user id")
    return ids


@dataclass(frozen=True)
class CurrentSetup:
    """What the home holds before init changes it (a re-run keeps what it does not ask)."""

    providers: list[ProviderSettings]
    telegram: PluginInstanceSettings | None  # the enabled instance init manages
    keys: frozenset[str]  # provider ids with an API key in auth.json
    has_token: bool

    @classmethod
    def read(cls, paths: HomePaths) -> CurrentSetup:
        from claybot.config.store import ConfigStore

        store = ConfigStore(paths)
        settings = store.read_settings()
        auth = store.read_auth()
        telegram = next(
            (p for p in settings.plugins if p.instance_id == TELEGRAM and p.enabled), None
        )
        keys = frozenset(entry for entry in auth.root if auth.has(entry, "apiKey"))
        return cls(settings.providers, telegram, keys, auth.has(TELEGRAM, "token"))

    def provider(self, provider_id: str) -> ProviderSettings | None:
        return next((p for p in self.providers if p.id == provider_id), None)


@dataclass(frozen=True)
class ProviderAnswer:
    id: str
    model: str | None  # None: the configured one, else the provider's default
    key: str | None  # None: none needed, or keep the one in auth.json


@dataclass(frozen=True)
class TelegramAnswer:
    token: str | None  # None: keep the one in auth.json
    allowed: list[int]


def ask_providers(
    current: CurrentSetup,
    questions: Questions,
    chosen: str | None,
    model: str | None,
    key_source: SecretSource,
) -> list[ProviderAnswer]:
    console.print("\n[bold]1. Inference[/bold]")
    first = current.providers[0].provider_type if current.providers else "local"
    provider = chosen or questions.choose(
        "Which provider should answer first?",
        flag="--provider",
        choices=PROVIDER_CHOICES,
        default=first if first in PROVIDER_CHOICES else "local",
    )
    answers = [ask_provider(current, questions, provider, model, key_source)]
    while questions.interactive and typer.confirm(
        "Add another provider, tried when the ones before fail?", default=False
    ):
        provider = questions.choose(
            "Which provider?", flag="--provider", choices=PROVIDER_CHOICES, default="local"
        )
        asked = SecretSource("the API key", None, False, None, "")
        answers.append(ask_provider(current, questions, provider, None, asked))
    return answers


def ask_provider(
    current: CurrentSetup,
    questions: Questions,
    provider: str,
    model: str | None,
    key_source: SecretSource,
) -> ProviderAnswer:
    if provider == "local":
        return ProviderAnswer(provider, None, None)
    if model is None and questions.interactive:
        existing = current.provider(provider)
        default = (existing.model if existing else None) or default_model(provider)
        answer = questions.text("Model", flag="--model", default=default, parse=str.strip)
        model = None if answer == default_model(provider) else answer
    key = key_source.read(questions, f"{provider} API key (typed hidden)")
    if key is None and provider not in current.keys:
        questions.unanswered(f"{provider} API key", key_source.flags, None)
    return ProviderAnswer(provider, model, key)


def ask_telegram(
    current: CurrentSetup,
    questions: Questions,
    enable: bool | None,
    token_source: SecretSource,
    allowed: list[int] | None,
) -> TelegramAnswer | None:
    console.print("\n[bold]2. Telegram[/bold]")
    configured = current.telegram
    if enable is None:
        enable = questions.confirm(
            "Talk to your agents from Telegram (a bot of yours, from @BotFather)?",
            flag="--telegram/--no-telegram",
            default=configured is not None,
        )
    if not enable:
        return None
    token = token_source.read(questions, "Telegram bot token (typed hidden)")
    if token is None and not current.has_token:
        questions.unanswered("Telegram bot token", token_source.flags, None)
    if token is not None and not TOKEN_PATTERN.match(token):
        fail("that is not a bot token: @BotFather gives one like 123456789:AAE...")
    if allowed is None:
        known = (configured.settings.get("allowedUserIds") if configured else None) or []
        allowed = questions.text(
            "Telegram user ids allowed to talk to it (comma separated; @userinfobot tells yours)",
            flag="--telegram-allow USER_ID",
            default=", ".join(str(user) for user in known) or None,
            parse=parse_user_ids,
        )
    return TelegramAnswer(token, allowed)


def ask_service(questions: Questions, install: bool | None) -> bool:
    from claybot.cli.service_managers import default_kind, service_manager

    console.print("\n[bold]4. Service[/bold]")
    if install is not None:
        return install
    problem = service_manager(default_kind(), os.environ).unreachable()
    if problem is not None:
        console.print(f"note: {escape(problem)}", highlight=False, soft_wrap=True)
    return questions.confirm(
        "Run the engine as your user's service (at login, restarted after a crash)?",
        flag="--service/--no-service",
        default=problem is None,
    )
