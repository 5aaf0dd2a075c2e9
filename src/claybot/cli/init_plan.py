"""What ``claybot init`` will change, worked out from the answers before anything is
written: each change (so a running engine can apply it, and undo it), and the two
files as the whole setup leaves them (so they can be written at once). No I/O."""

from __future__ import annotations

from dataclasses import dataclass

from claybot.cli.init_questions import TELEGRAM, CurrentSetup, ProviderAnswer, TelegramAnswer
from claybot.config.auth import AuthFile
from claybot.config.settings import PluginInstanceSettings, ProviderSettings, Settings


@dataclass(frozen=True)
class SecretChange:
    entry_id: str
    key: str  # "apiKey", "token"
    value: str
    previous: str | None  # what auth.json holds now: what an undo puts back


@dataclass(frozen=True)
class ProviderChange:
    provider: ProviderSettings
    position: int


@dataclass(frozen=True)
class PluginChange:
    entry: PluginInstanceSettings  # as it will be saved (enabled)
    previous: PluginInstanceSettings | None  # the configured one with its id, if any
    token_changed: bool

    @property
    def unchanged(self) -> bool:
        """Saved already as it would be (a running engine may still have to load it)."""
        return self.previous == self.entry and not self.token_changed


@dataclass(frozen=True)
class SetupPlan:
    current: CurrentSetup
    secrets: tuple[SecretChange, ...]
    providers: tuple[ProviderChange, ...]
    plugin: PluginChange | None
    settings: Settings  # settings.json once the whole setup is applied
    auth: AuthFile  # auth.json likewise


def planned_provider(current: CurrentSetup, answer: ProviderAnswer) -> ProviderSettings:
    """The provider as settings.json will hold it: a configured one keeps what init
    does not ask (its type, its options), and is enabled."""
    existing = current.provider(answer.id)
    if existing is None:
        return ProviderSettings(id=answer.id, model=answer.model)
    return existing.model_copy(update={"model": answer.model, "enabled": True})


def plan_setup(
    current: CurrentSetup,
    providers: list[ProviderAnswer],
    bot: TelegramAnswer | None,
    bot_entry: PluginInstanceSettings | None,
) -> SetupPlan:
    """The changes the answers make to ``current`` (none where a value stays the same).

    ``bot_entry`` is the Telegram instance as checked for saving (``checked_instance``).
    """
    from claybot.providers.registry import with_provider

    auth = current.auth
    secrets: list[SecretChange] = []
    wanted = [(answer.id, "apiKey", answer.key) for answer in providers]
    wanted.append((TELEGRAM, "token", bot.token if bot is not None else None))
    for entry_id, key, value in wanted:
        stored = current.secret(entry_id, key)
        if value is not None and value != stored:
            secrets.append(SecretChange(entry_id, key, value, stored))
            auth = auth.with_field(entry_id, key, value)

    order = list(current.providers)
    changes: list[ProviderChange] = []
    for position, answer in enumerate(providers):
        provider = planned_provider(current, answer)
        after = with_provider(order, provider, position)
        if after != order:
            changes.append(ProviderChange(provider, position))
            order = after

    plugins = list(current.settings.plugins)
    plugin = None
    if bot_entry is not None:
        previous = next((p for p in plugins if p.instance_id == bot_entry.instance_id), None)
        token_changed = any(secret.entry_id == TELEGRAM for secret in secrets)
        plugin = PluginChange(bot_entry, previous, token_changed)
        if previous is None:
            plugins.append(bot_entry)
        else:
            plugins[plugins.index(previous)] = bot_entry
    settings = current.settings.model_copy(update={"providers": order, "plugins": plugins})
    return SetupPlan(current, tuple(secrets), tuple(changes), plugin, settings, auth)
