"""What ``claybot init`` asks, and the answers it gathers before it changes anything.

The sources of secrets (an environment variable, stdin, the command line, a hidden
prompt), the current setup a re-run starts from, and one function per question. An
answer is final: it says exactly what would be saved (the checks and the plan take it
as it is).
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass
from typing import Any

import typer
from rich.markup import escape

from claybot.cli.common import console, err_console, fail
from claybot.cli.questions import Questions
from claybot.config.auth import AuthFile
from claybot.config.home import HomePaths
from claybot.config.settings import PluginInstanceSettings, ProviderSettings, Settings

PROVIDER_CHOICES = ("openai", "anthropic", "local")
TELEGRAM = "telegram"  # the plugin, and the instance init configures
TOKEN_PATTERN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")  # what @BotFather hands out
NOT_A_TOKEN = "that is not a bot token: @BotFather gives one like 123456789:AAE..."


def default_model(provider: str) -> str | None:
    from claybot.providers.anthropic_provider import DEFAULT_MODEL as ANTHROPIC
    from claybot.providers.openai_provider import DEFAULT_MODEL as OPENAI

    return {"openai": OPENAI, "anthropic": ANTHROPIC}.get(provider)


@dataclass(frozen=True)
class SecretSource:
    """Where a secret comes from: at most one of an environment variable, stdin, or the
    command line (which shell history and ``ps`` can show)."""

    what: str  # "the API key", for messages
    env: str | None
    stdin: bool
    value: str | None
    flags: str  # "--api-key-env VAR or --api-key-stdin", for messages

    def given(self) -> bool:
        return self.env is not None or self.stdin or self.value is not None

    def check(self) -> None:
        if sum((self.env is not None, self.stdin, self.value is not None)) > 1:
            fail(f"give {self.what} one way only ({self.flags})")

    def read_given(self, label: str) -> str:
        """The secret from the option that gives it (``given()`` is true)."""
        from claybot.cli.auth_cmds import read_secret

        if self.env is not None:
            value = os.environ.get(self.env, "")
            if not value:
                fail(f"{self.env} is not set (or is empty), so {self.what} cannot be read from it")
            return value
        if self.value is not None:
            return self.value
        return read_secret(label)  # --…-stdin: hidden on a terminal, else a line of stdin


def ask_secret(label: str, on_enter: str) -> str | None:
    """A secret typed hidden on the terminal; None when Enter alone was pressed, which
    does what ``on_enter`` says (the prompt says it too)."""
    typed = getpass.getpass(f"{label} (typed hidden; Enter {on_enter}): ")
    return typed.strip() or None


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
    """What the home holds before init changes it: a re-run keeps what it does not ask,
    and an apply that fails puts this back."""

    settings: Settings
    auth: AuthFile

    @classmethod
    def read(cls, paths: HomePaths) -> CurrentSetup:
        from claybot.config.store import ConfigStore

        store = ConfigStore(paths)
        return cls(store.read_settings(), store.read_auth())

    @property
    def providers(self) -> list[ProviderSettings]:
        return self.settings.providers

    @property
    def telegram(self) -> PluginInstanceSettings | None:
        """The instance init manages, when it is enabled."""
        return next(
            (p for p in self.settings.plugins if p.instance_id == TELEGRAM and p.enabled), None
        )

    def provider(self, provider_id: str) -> ProviderSettings | None:
        return next((p for p in self.providers if p.id == provider_id), None)

    def secret(self, entry_id: str, key: str) -> str | None:
        entry = self.auth.get(entry_id)
        return entry.secret(key) if entry is not None else None


@dataclass(frozen=True)
class ProviderAnswer:
    id: str
    model: str | None  # what settings.json will say (None: the provider's default)
    key: str | None  # None: none needed, or keep the one in auth.json


@dataclass(frozen=True)
class TelegramAnswer:
    token: str | None  # None: keep the one in auth.json
    allowed: list[int]
    base_url: str | None  # --telegram-base-url; None: the instance's, else Telegram's

    def settings(self, current: CurrentSetup) -> dict[str, Any]:
        """The instance's settings: what init does not ask is kept. A dict: their shape
        is the Telegram plugin's settings model, which checks them when it loads."""
        settings = dict(current.telegram.settings) if current.telegram else {}
        settings["allowedUserIds"] = self.allowed
        if self.base_url is not None:
            settings["baseUrl"] = self.base_url
        return settings


def choose_provider(
    current: CurrentSetup, questions: Questions, chosen: str | None, first: bool
) -> str:
    if chosen is not None:
        return chosen
    if not first:
        return questions.choose(
            "Which provider?", flag="--provider", choices=PROVIDER_CHOICES, default="local"
        )
    configured = current.providers[0].provider_type if current.providers else "local"
    return questions.choose(
        "Which provider should answer first?",
        flag="--provider",
        choices=PROVIDER_CHOICES,
        default=configured if configured in PROVIDER_CHOICES else "local",
    )


def wants_another_provider(questions: Questions) -> bool:
    return questions.interactive and typer.confirm(
        "Add another provider, tried when the ones before fail?", default=False
    )


def ask_provider(
    current: CurrentSetup,
    questions: Questions,
    provider: str,
    model: str | None,
    key_source: SecretSource,
    again: ProviderAnswer | None = None,
) -> ProviderAnswer | None:
    """The provider's model and key; None when the user left it out (Enter at the key
    prompt with no key to keep). ``again``: the answer whose check failed, asked anew
    with its values as what Enter keeps."""
    if provider == "local":
        return ProviderAnswer(provider, None, None)
    existing = current.provider(provider)
    configured = existing.model if existing is not None else None
    if model is None and questions.interactive:
        shown = (again.model if again else configured) or default_model(provider)
        answer = questions.text("Model", flag="--model", default=shown, parse=str.strip)
        model = None if answer == default_model(provider) else answer
    elif model is None:
        model = again.model if again else configured
    label = f"{provider} API key"
    stored = current.secret(provider, "apiKey")
    if again is not None and questions.interactive:
        return ProviderAnswer(provider, model, ask_secret(label, "keeps it") or again.key)
    if key_source.given():
        return ProviderAnswer(provider, model, key_source.read_given(f"{label} (typed hidden)"))
    if not questions.interactive:
        if stored is None:
            questions.unanswered(label, key_source.flags, None)
        return ProviderAnswer(provider, model, None)
    if stored is not None:
        return ProviderAnswer(provider, model, ask_secret(label, "keeps the one in auth.json"))
    key = ask_secret(label, f"leaves {provider} out of this setup")
    if key is None:
        console.print(f"{provider} is left out of this setup: no key was given", highlight=False)
        return None
    return ProviderAnswer(provider, model, key)


def ask_telegram_wanted(current: CurrentSetup, questions: Questions, enable: bool | None) -> bool:
    if enable is not None:
        return enable
    return questions.confirm(
        "Talk to your agents from Telegram (a bot of yours, from @BotFather)?",
        flag="--telegram/--no-telegram",
        default=current.telegram is not None,
    )


def ask_telegram(
    current: CurrentSetup,
    questions: Questions,
    token_source: SecretSource,
    allowed: list[int] | None,
    base_url: str | None,
    again: TelegramAnswer | None = None,
) -> TelegramAnswer | None:
    """The bot token and who may talk to it; None when the user left Telegram out
    (Enter at the token prompt with no token to keep). ``again``: as in ask_provider."""
    label = "Telegram bot token"
    stored = current.secret(TELEGRAM, "token")
    if again is not None and questions.interactive:
        token = _typed_token(label, "keeps it") or again.token
    elif token_source.given():
        token = token_source.read_given(f"{label} (typed hidden)")
        if not TOKEN_PATTERN.match(token):
            fail(NOT_A_TOKEN)
    elif not questions.interactive:
        if stored is None:
            questions.unanswered(label, token_source.flags, None)
        token = None
    elif stored is not None:
        token = _typed_token(label, "keeps the one in auth.json")
    else:
        token = _typed_token(label, "leaves Telegram out of this setup")
        if token is None:
            console.print("Telegram is left out of this setup: no token was given")
            return None
    if again is not None:
        allowed = again.allowed
    elif allowed is None:
        configured = current.telegram
        known = (configured.settings.get("allowedUserIds") if configured else None) or []
        allowed = questions.text(
            "Telegram user ids allowed to talk to it (comma separated; @userinfobot tells yours)",
            flag="--telegram-allow USER_ID",
            default=", ".join(str(user) for user in known) or None,
            parse=parse_user_ids,
        )
    return TelegramAnswer(token, allowed, base_url)


def _typed_token(label: str, on_enter: str) -> str | None:
    """A token typed hidden, asked again until it looks like one (or Enter alone)."""
    while True:
        token = ask_secret(label, on_enter)
        if token is None or TOKEN_PATTERN.match(token):
            return token
        err_console.print(f"[red]{NOT_A_TOKEN}[/red]", highlight=False)


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
