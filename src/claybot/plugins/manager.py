"""Loading and unloading plugin instances, and keeping settings.json in step.

Check before you save: an instance is written to settings.json only after its
settings validated and its ``load()`` succeeded. A load that fails leaves
nothing registered and nothing written. At boot ``restore`` loads every
enabled instance; one that fails is logged and listed in ``failures`` (it stays
enabled, so the next start tries again) and the others load regardless.

It is longer than most modules because load, reload, unload and restore share one
rule set (validate, load, then persist; roll back on failure) and one lock; keeping
them together keeps that rule in one place.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from pydantic import BaseModel, ValidationError

from claybot.config.auth import AuthEntry
from claybot.config.home import HomePaths
from claybot.config.settings import PluginInstanceSettings, Settings
from claybot.config.store import ConfigStore, describe_validation_error
from claybot.connectors.base import ConversationControl, PostInbound
from claybot.files.store import FileStore
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.plugin_api.api import AuthLookup, PluginApi
from claybot.plugin_api.definition import PluginDefinition, PluginInstance
from claybot.plugin_api.errors import (
    InstanceAlreadyLoaded,
    InstanceIdTaken,
    InstanceNotFound,
    LoadFailureKind,
    PluginAuthFailed,
    PluginError,
    PluginLoadFailed,
    PluginNotReady,
    PluginSettingsInvalid,
    SettingsFileError,
    UnknownPlugin,
)
from claybot.plugin_api.registrar import PluginRegistrar
from claybot.plugin_api.registries import ConnectorSummary, Registries
from claybot.plugins.catalog import CatalogEntry, ConfiguredEntry, PluginCatalog
from claybot.plugins.instance_states import InstanceState, states_of
from claybot.plugins.rules import (
    RunningInstance,
    check_exclusive,
    check_instance_id,
    default_instance_id,
)
from claybot.plugins.settings_file import PluginSettingsFile
from claybot.sandbox import Sandbox

log = logging.getLogger(__name__)

LOAD_TIMEOUT_S = 60.0
UNLOAD_TIMEOUT_S = 30.0

PLUGIN_LOADED = EventType.PLUGIN_LOADED
PLUGIN_UNLOADED = EventType.PLUGIN_UNLOADED


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class PluginSummary(TypedDict):
    """A loaded instance as listings show it (``wire.plugins.PluginSummary``)."""

    id: str
    pluginId: str
    name: str


class PluginFailureSummary(TypedDict):
    """An instance that failed to load, and why (``wire.plugins.PluginFailure``)."""

    id: str
    pluginId: str
    at: str
    code: str
    message: str
    field: NotRequired[str]
    kind: NotRequired[LoadFailureKind]


class PluginListing(TypedDict):
    loaded: list[PluginSummary]
    configured: list[ConfiguredEntry]
    failures: list[PluginFailureSummary]
    catalog: list[CatalogEntry]


@dataclass
class LoadedPlugin:
    instance_id: str
    definition: PluginDefinition[Any]
    settings: BaseModel
    instance: PluginInstance
    registrar: PluginRegistrar
    loaded_at: datetime
    stored: PluginInstanceSettings  # the settings.json entry this instance runs from

    @property
    def plugin_id(self) -> str:
        return self.definition.id

    @property
    def name(self) -> str:
        return self.definition.name

    def summary(self) -> PluginSummary:
        return {"id": self.instance_id, "pluginId": self.plugin_id, "name": self.name}


@dataclass(frozen=True)
class PluginFailure:
    instance_id: str
    plugin_id: str
    error: PluginError
    at: datetime

    def to_dict(self) -> PluginFailureSummary:
        # The error's fields as ``ClayError.to_dict`` and ``PluginLoadFailed.to_dict``
        # write them: ``field`` only when one input is to blame, then ``kind``.
        error = self.error
        failure: PluginFailureSummary = {
            "id": self.instance_id,
            "pluginId": self.plugin_id,
            "at": _iso(self.at),
            "code": error.code,
            "message": error.message,
        }
        if error.field is not None:
            failure["field"] = error.field
        if isinstance(error, PluginLoadFailed):
            failure["kind"] = error.kind
        return failure


def _settings_field(error: ValidationError) -> str:
    first = error.errors()[0]["loc"] if error.errors() else ()
    return ".".join(["settings", *(str(part) for part in first)])


def _failure_kind(exc: BaseException) -> LoadFailureKind:
    if isinstance(exc, PluginNotReady):
        return "not_ready"
    if isinstance(exc, PluginAuthFailed):
        return "auth_failed"
    if isinstance(exc, PluginSettingsInvalid):
        return "settings_invalid"
    return "error"


class PluginManager:
    def __init__(
        self,
        catalog: PluginCatalog,
        registries: Registries,
        config: ConfigStore,
        events: EventBus,
        home: HomePaths,
        post_message: PostInbound,
        auth_lookup: AuthLookup | None = None,
        *,
        control: ConversationControl | None = None,
        sandbox: Sandbox | None = None,
        files: FileStore | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        load_timeout_s: float = LOAD_TIMEOUT_S,
        unload_timeout_s: float = UNLOAD_TIMEOUT_S,
    ) -> None:
        self.catalog = catalog
        self.registries = registries
        self._config = config
        self._settings = PluginSettingsFile(config)
        self._events = events
        self._home = home
        self._post_message = post_message
        self._auth_lookup = auth_lookup or self._read_auth_entry
        self._control = control
        self._sandbox = sandbox
        self._files = files
        self._now = now
        self._load_timeout_s = load_timeout_s
        self._unload_timeout_s = unload_timeout_s
        self._loaded: dict[str, LoadedPlugin] = {}  # in load order
        self.failures: dict[str, PluginFailure] = {}
        # One change at a time: two loads must not pick the same default id, and
        # each read-modify-write of settings.json must see the previous one.
        self._lock = asyncio.Lock()

    # -- queries ---------------------------------------------------------------

    def get(self, instance_id: str) -> LoadedPlugin | None:
        return self._loaded.get(instance_id)

    def loaded(self) -> list[LoadedPlugin]:
        return list(self._loaded.values())

    def listing(self) -> PluginListing:
        """What is loaded, what settings.json configures, what failed, what can be loaded."""
        return {
            "loaded": self.plugin_summaries(),
            "configured": self.configured(),
            "failures": self.failure_summaries(),
            "catalog": self.catalog.describe(),
        }

    def instance_states(self) -> list[InstanceState]:
        """Each instance with its state and what can be done to it."""
        return states_of(self.listing())

    def plugin_summaries(self) -> list[PluginSummary]:
        return [loaded.summary() for loaded in self._loaded.values()]

    def connector_summaries(self) -> list[ConnectorSummary]:
        return self.registries.connectors.summaries()

    def failure_summaries(self) -> list[PluginFailureSummary]:
        return [failure.to_dict() for failure in self.failures.values()]

    def configured(self) -> list[ConfiguredEntry]:
        """The settings.json entries with their secrets redacted: what listings show."""
        return [self.catalog.public_entry(entry) for entry in self._settings.entries()]

    # -- changes ---------------------------------------------------------------

    async def load(
        self,
        plugin_id: str,
        instance_id: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> LoadedPlugin:
        """Validate, start and then save one instance (enabled) in settings.json."""
        async with self._lock:
            definition = self.catalog.get(plugin_id)
            if definition is None:
                raise UnknownPlugin(plugin_id)
            configured = {entry.instance_id: entry for entry in self._settings.entries()}

            def is_free(candidate: str) -> bool:
                entry = configured.get(candidate)
                # A configured entry of this plugin that is not running is taken over
                # (loading "telegram" again after unloading it brings it back).
                return candidate not in self._loaded and (
                    entry is None or entry.plugin_id == plugin_id
                )

            if instance_id is None:
                # An exclusive plugin runs once, under its bare id.
                instance_id = (
                    plugin_id if definition.exclusive else default_instance_id(plugin_id, is_free)
                )
            check_instance_id(instance_id)
            existing = configured.get(instance_id)
            running = self._loaded.get(instance_id)
            for owner in (running, existing):
                if owner is not None and owner.plugin_id != plugin_id:
                    raise InstanceIdTaken(instance_id, owner.plugin_id)
            if running is not None:
                raise InstanceAlreadyLoaded(instance_id)
            check_exclusive(plugin_id, definition.exclusive, self._running())
            if settings is None:
                settings = existing.settings if existing is not None else {}

            loaded = await self._start(definition, instance_id, settings)
            try:
                self._settings.upsert(loaded.stored)
            except SettingsFileError:
                await self._stop(loaded)
                raise
            self._loaded[instance_id] = loaded
            self.failures.pop(instance_id, None)
            self._emit_loaded(loaded)
            return loaded

    async def unload(self, instance_id: str) -> None:
        """Stop one instance and keep it in settings.json with enabled=false."""
        async with self._lock:
            loaded = self._loaded.pop(instance_id, None)
            if loaded is None:
                entry = self._settings.entry(instance_id)
                if entry is None or not entry.enabled:
                    raise InstanceNotFound(instance_id)
                # Enabled but not running (it failed at boot): unloading disables it.
                self._settings.upsert(entry.model_copy(update={"enabled": False}))
                self.failures.pop(instance_id, None)
                self._events.emit(PLUGIN_UNLOADED, {"id": instance_id, "pluginId": entry.plugin_id})
                return
            await self._stop(loaded)
            self._emit_unloaded(loaded)
            try:
                current = self._settings.entry(instance_id) or loaded.stored
                self._settings.upsert(current.model_copy(update={"enabled": False}))
            except SettingsFileError as exc:
                raise SettingsFileError(
                    f"{instance_id!r} is unloaded, but settings.json could not record it "
                    f"({exc.message}); it will load again at the next start"
                ) from exc

    async def restore(self, settings: Settings | None = None) -> None:
        """Load every enabled instance of settings.json; failures are recorded, not raised.

        Instances already running are left alone, so calling it again only retries
        what is not running.
        """
        async with self._lock:
            await self._restore_enabled(settings if settings is not None else self._settings.read())

    async def follow(self, settings: Settings) -> None:
        """Run what ``settings`` (settings.json as edited by hand or by another tool)
        says: an instance it no longer has, or has disabled, or has with other settings,
        is stopped (the file is left as it is); then every enabled instance that is not
        running is loaded, as at boot (failures recorded, not raised)."""
        async with self._lock:
            wanted = {entry.instance_id: entry for entry in settings.plugins}
            for instance_id, loaded in list(self._loaded.items()):
                entry = wanted.get(instance_id)
                if (
                    entry is not None
                    and entry.enabled
                    and entry.plugin_id == loaded.plugin_id
                    and entry.settings == loaded.stored.settings
                ):
                    continue
                del self._loaded[instance_id]
                await self._stop(loaded)
                self._emit_unloaded(loaded)
            for instance_id in list(self.failures):
                entry = wanted.get(instance_id)
                if entry is None or not entry.enabled:
                    del self.failures[instance_id]  # no longer asked for
            await self._restore_enabled(settings)

    async def _restore_enabled(self, current: Settings) -> None:
        already_running = set(self._loaded)
        for entry in current.plugins:
            if not entry.enabled or entry.instance_id in already_running:
                continue
            try:
                loaded = await self._restore_one(entry)
            except PluginError as exc:
                self._record_failure(entry, exc)
                continue
            except Exception as exc:
                log.exception("restoring plugin instance %r failed", entry.instance_id)
                self._record_failure(
                    entry, PluginLoadFailed(entry.instance_id, f"{type(exc).__name__}: {exc}")
                )
                continue
            self._loaded[entry.instance_id] = loaded
            self.failures.pop(entry.instance_id, None)
            self._emit_loaded(loaded)

    async def shutdown(self) -> None:
        """Unload every instance, newest first, leaving settings.json as it is."""
        async with self._lock:
            for loaded in reversed(list(self._loaded.values())):
                await self._stop(loaded)
                self._emit_unloaded(loaded)
            self._loaded.clear()

    # -- internals -------------------------------------------------------------

    async def _restore_one(self, entry: PluginInstanceSettings) -> LoadedPlugin:
        definition = self.catalog.get(entry.plugin_id)
        if definition is None:
            raise UnknownPlugin(entry.plugin_id)
        if entry.instance_id in self._loaded:
            raise InstanceAlreadyLoaded(entry.instance_id)
        check_exclusive(entry.plugin_id, definition.exclusive, self._running())
        return await self._start(definition, entry.instance_id, entry.settings)

    def _running(self) -> list[RunningInstance]:
        return [
            RunningInstance(loaded.instance_id, loaded.plugin_id, loaded.definition.exclusive)
            for loaded in self._loaded.values()
        ]

    def _validate(
        self, definition: PluginDefinition[Any], raw: Mapping[str, Any]
    ) -> tuple[BaseModel, dict[str, Any]]:
        try:
            model = definition.settings_model.model_validate(raw)
        except ValidationError as exc:
            raise PluginSettingsInvalid(
                definition.id, describe_validation_error(exc), field=_settings_field(exc)
            ) from exc
        # Only what was given is stored, so a default that changes in a later
        # version of the plugin applies to instances that never set it.
        stored = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return model, stored

    async def _start(
        self, definition: PluginDefinition[Any], instance_id: str, raw: Mapping[str, Any]
    ) -> LoadedPlugin:
        settings, stored = self._validate(definition, raw)
        entry = PluginInstanceSettings(
            instance_id=instance_id, plugin_id=definition.id, enabled=True, settings=stored
        )
        data_dir = self._home.plugins / instance_id
        created_dir = not data_dir.exists()
        try:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise PluginLoadFailed(instance_id, f"cannot create {data_dir}: {exc}") from exc
        registrar = PluginRegistrar(
            self.registries,
            instance_id=instance_id,
            plugin_id=definition.id,
            plugin_name=definition.name,
            now=self._now,
        )
        api: PluginApi[Any] = PluginApi(
            instance_id=instance_id,
            plugin_id=definition.id,
            settings=settings,
            data_dir=data_dir,
            registrar=registrar,
            events=self._events,
            post_message=self._post_message,
            auth_lookup=self._auth_lookup,
            control=self._control,
            sandbox=self._sandbox,
            files=self._files,
        )
        instance: PluginInstance | None = None
        deadline = asyncio.timeout(self._load_timeout_s)
        try:
            created = definition.create(api)
            if not isinstance(created, PluginInstance):
                raise TypeError(
                    f"create() returned {type(created).__name__}, which has no load()/unload()"
                )
            instance = created
            async with deadline:
                await instance.load()
        except BaseException as exc:
            registrar.unregister_all()
            if instance is not None:
                await self._call_unload(instance_id, instance)
            if created_dir:
                shutil.rmtree(data_dir, ignore_errors=True)
            if not isinstance(exc, Exception):
                raise  # cancellation: cleaned up, now let it through
            raise self._load_failed(instance_id, exc, timed_out=deadline.expired()) from exc
        return LoadedPlugin(
            instance_id=instance_id,
            definition=definition,
            settings=settings,
            instance=instance,
            registrar=registrar,
            loaded_at=self._now(),
            stored=entry,
        )

    def _load_failed(
        self, instance_id: str, exc: Exception, *, timed_out: bool
    ) -> PluginLoadFailed:
        # A TimeoutError the plugin raised itself (say, from its HTTP client) is an
        # ordinary failure; only our own deadline is reported as a timeout.
        kind = "timeout" if timed_out else _failure_kind(exc)
        if isinstance(exc, PluginError):
            reason, field = exc.message, exc.field
        elif kind == "timeout":
            reason, field = f"load() did not finish within {self._load_timeout_s:g}s", None
        else:
            reason, field = f"{type(exc).__name__}: {exc}", None
        log.warning(
            "plugin instance %r failed to load: %s",
            instance_id,
            reason,
            # A PluginError says what went wrong (a user's mistake, or the plugin's own
            # account of it); only an exception nobody described needs its traceback.
            exc_info=kind == "error" and not isinstance(exc, PluginError),
            extra={"action": "plugin.load_failed", "instanceId": instance_id, "kind": kind},
        )
        return PluginLoadFailed(instance_id, reason, kind=kind, field=field)

    async def _stop(self, loaded: LoadedPlugin) -> None:
        await self._call_unload(loaded.instance_id, loaded.instance)
        loaded.registrar.unregister_all()

    async def _call_unload(self, instance_id: str, instance: PluginInstance) -> None:
        # Unloading always completes from the engine's side: a plugin that fails or
        # hangs in unload() is logged, and its registrations are removed regardless.
        try:
            async with asyncio.timeout(self._unload_timeout_s):
                await instance.unload()
        except Exception:
            log.warning(
                "plugin instance %r did not unload cleanly",
                instance_id,
                exc_info=True,
                extra={"action": "plugin.unload_failed", "instanceId": instance_id},
            )

    def _record_failure(self, entry: PluginInstanceSettings, error: PluginError) -> None:
        log.error(
            "plugin instance %r (%s) was not restored: %s; fix it and load it again",
            entry.instance_id,
            entry.plugin_id,
            error.message,
            extra={"action": "plugin.restore_failed", "instanceId": entry.instance_id},
        )
        self.failures[entry.instance_id] = PluginFailure(
            entry.instance_id, entry.plugin_id, error, self._now()
        )

    def _emit_loaded(self, loaded: LoadedPlugin) -> None:
        self._events.emit(
            PLUGIN_LOADED,
            {"id": loaded.instance_id, "pluginId": loaded.plugin_id, "name": loaded.name},
        )

    def _emit_unloaded(self, loaded: LoadedPlugin) -> None:
        self._events.emit(PLUGIN_UNLOADED, {"id": loaded.instance_id, "pluginId": loaded.plugin_id})

    def _read_auth_entry(self, instance_id: str) -> AuthEntry | None:
        return self._config.read_auth().get(instance_id)
