"""Applying a planned setup whole, or not at all.

Without an engine, each file is written once: auth.json first (a key that nothing uses
yet harms nothing), then settings.json; if settings.json cannot be written, auth.json is
put back byte for byte.

A running engine owns the files (it holds the settings in memory and writes them), so
it applies each change through its API, with the API's own checks and events. A failed
step is undone through the API too: the provider order put back, each key and token set
back (or removed), and a Telegram instance unloaded for the change loaded again as it
was. The plugin load comes last because it is the step that can fail (Telegram must
answer the engine as well), and everything before it can be undone exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from claybot.cli.init_plan import PluginChange, SecretChange, SetupPlan
from claybot.config.home import HomePaths
from claybot.config.settings import PluginInstanceSettings
from claybot.config.store import ConfigStore
from claybot.durable.atomic import atomic_write_bytes

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient

# Loading a plugin waits on its service (Telegram's getMe) inside the engine.
ENGINE_TIMEOUT_S = 60.0
INTERRUPTED = "interrupted (Ctrl-C) while saving"


class SetupNotApplied(Exception):
    """Applying failed, and what had been applied was undone, except ``leftovers``
    (what could not be undone, in words)."""

    def __init__(self, reason: str, leftovers: list[str], *, interrupted: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.leftovers = leftovers
        self.interrupted = interrupted  # by Ctrl-C


@dataclass(frozen=True)
class Applied:
    through_engine: bool
    plugin: str | None  # what became of the Telegram instance, when the setup has one
    failures: dict[str, str]  # providers the running engine could not build, and why


def apply_setup(paths: HomePaths, plan: SetupPlan) -> Applied:
    from claybot.client.engine_client import EngineClient

    with EngineClient(paths.socket, timeout_s=ENGINE_TIMEOUT_S) as client:
        if client.is_running():
            return _through_engine(client, plan)
    write_setup_files(ConfigStore(paths), plan)
    plugin = None
    if plan.plugin is not None:
        instance_id = plan.plugin.entry.instance_id
        plugin = f"saved {instance_id} in settings.json; it loads when the engine starts"
    return Applied(False, plugin, {})


def write_setup_files(store: ConfigStore, plan: SetupPlan) -> None:
    """auth.json, then settings.json, as the plan leaves them; a file that stays the same
    is not written at all."""
    paths = store.paths
    auth_changes = plan.auth != plan.current.auth
    settings_change = plan.settings != plan.current.settings
    if not (auth_changes or settings_change):
        return
    paths.ensure()
    auth_before = _contents(paths.auth)
    try:
        if auth_changes:
            store.write_auth(plan.auth)
    except OSError as exc:
        raise SetupNotApplied(f"auth.json cannot be written: {exc}", []) from exc
    try:
        if settings_change:
            store.write_settings(plan.settings)
    except BaseException as exc:
        leftovers = []
        if auth_changes:
            try:
                _put_back(paths.auth, auth_before)
            except OSError as undo_failed:
                leftovers.append(f"auth.json keeps the new keys ({undo_failed})")
        if isinstance(exc, KeyboardInterrupt):
            raise SetupNotApplied(INTERRUPTED, leftovers, interrupted=True) from exc
        if isinstance(exc, Exception):
            raise SetupNotApplied(f"settings.json cannot be written: {exc}", leftovers) from exc
        raise


def _contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _put_back(path: Path, contents: bytes | None) -> None:
    if contents is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write_bytes(path, contents, mode=0o600)


@dataclass
class _Undo:
    """What has been applied through the engine so far, and how to take it back."""

    client: EngineClient
    plan: SetupPlan
    secrets: list[SecretChange] = field(default_factory=list)
    providers: bool = False
    unloaded: PluginInstanceSettings | None = None  # running before, stopped for the change

    def run(self) -> list[str]:
        """Undo, in reverse; returns what could not be undone."""
        leftovers: list[str] = []

        def attempt(what: str, action: Callable[[], object]) -> None:
            try:
                action()
            except Exception as exc:
                leftovers.append(f"{what} ({_reason(exc)})")

        if self.providers:
            attempt("the provider order is not as it was", self._restore_providers)
        for secret in reversed(self.secrets):
            attempt(
                f"auth.json's {secret.entry_id}.{secret.key} keeps the new value",
                partial(self._restore_secret, secret),
            )
        # Last: the instance needs its token as it was.
        if self.unloaded is not None:
            entry = self.unloaded
            attempt(
                f"the {entry.instance_id} plugin instance is unloaded (claybot plugins load "
                f"{entry.plugin_id} --instance {entry.instance_id})",
                partial(_load, self.client, entry),
            )
        return leftovers

    def _restore_secret(self, secret: SecretChange) -> None:
        from claybot.client.errors import EngineApiError

        if secret.previous is not None:
            self.client.set_auth(secret.entry_id, secret.key, secret.previous)
            return
        try:
            self.client.remove_auth(secret.entry_id, secret.key)
        except EngineApiError as exc:
            if exc.status != 404:  # 404: the new value never got there
                raise

    def _restore_providers(self) -> None:
        """The same providers as before, in the same places: the new ones removed, then
        each old one put back at its index (which leaves the ones before it in place)."""
        before = self.plan.current.providers
        kept = {provider.id for provider in before}
        listed = self.client.providers().providers
        for provider_id in [p.id for p in listed if p.id not in kept]:
            self.client.remove_provider(provider_id)
        for position, provider in enumerate(before):
            self.client.upsert_provider({**provider.to_json_dict(), "position": position})


def _through_engine(client: EngineClient, plan: SetupPlan) -> Applied:
    undo = _Undo(client, plan)
    failures: dict[str, str] = {}
    plugin = None
    try:
        for secret in plan.secrets:
            # Listed first: a request may take effect and still fail (its answer lost).
            undo.secrets.append(secret)
            client.set_auth(secret.entry_id, secret.key, secret.value)
        undo.providers = bool(plan.providers)
        for change in plan.providers:
            body = {**change.provider.to_json_dict(), "position": change.position}
            failures = dict(client.upsert_provider(body).failures)
        if plan.plugin is not None:
            plugin = _plugin(undo, plan.plugin)
    except BaseException as exc:
        leftovers = undo.run()
        if isinstance(exc, KeyboardInterrupt):
            raise SetupNotApplied(INTERRUPTED, leftovers, interrupted=True) from exc
        if isinstance(exc, Exception):
            raise SetupNotApplied(f"the engine refused it: {_reason(exc)}", leftovers) from exc
        raise
    return Applied(True, plugin, failures)


def _plugin(undo: _Undo, change: PluginChange) -> str:
    """Load the instance as planned; one running already is unloaded first, unless it
    runs as planned."""
    instance_id = change.entry.instance_id
    loaded = {entry.id for entry in undo.client.plugins().loaded}
    if instance_id in loaded:
        if change.unchanged:
            return f"{instance_id} runs already, unchanged"
        undo.client.unload_plugin(instance_id)
        undo.unloaded = change.previous
    return _load(undo.client, change.entry)


def _load(client: EngineClient, entry: PluginInstanceSettings) -> str:
    body = {
        "pluginId": entry.plugin_id,
        "instanceId": entry.instance_id,
        "settings": entry.settings,
    }
    loaded = client.load_plugin(body).plugin
    return f"loaded {loaded.id} ({loaded.name})"


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
