"""``claybot plugins list | load | unload``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    RemoteOption,
    answer_json,
    console,
    fail,
    mutate,
    print_json,
    print_table,
)
from claybot.cli.ids import resolve_prefix, through_prefix
from claybot.cli.options import parse_assignments
from claybot.config.settings import PluginInstanceSettings
from claybot.config.store import describe_validation_error

if TYPE_CHECKING:
    from claybot.client.engine_client import EngineClient
    from claybot.config.store import ConfigStore
    from claybot.plugins import PluginCatalog
    from claybot.wire.plugins import PluginListing, PluginLoaded

app = typer.Typer(help="Plugin instances: list, load, unload.", no_args_is_help=True)


def _listing(home: Path | None) -> tuple[PluginListing, bool]:
    """The engine's plugin listing, or (no engine) settings.json and the installed plugins."""

    def online(client: EngineClient) -> PluginListing:
        return client.plugins()

    def offline(store: ConfigStore) -> PluginListing:
        from claybot.plugins import PluginCatalog
        from claybot.wire.plugins import PluginListing

        catalog = PluginCatalog.discover()
        configured = [catalog.public_entry(entry) for entry in store.read_settings().plugins]
        return PluginListing.model_validate(
            {
                "ok": True,
                "loaded": [],
                "configured": configured,
                "failures": [],
                "catalog": catalog.describe(),
            }
        )

    return mutate(home, None, online=online, offline=offline)


@app.command("list")
def list_plugins(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Loaded and configured instances, and the plugins that can be loaded.

    Without a running engine, lists settings.json and the installed plugins.
    """
    listing, running = _listing(home)
    if as_json:
        print_json(listing)
        return
    loaded = {entry.id for entry in listing.loaded}
    table = Table("instance", "plugin", "enabled", "state")
    for entry in listing.configured:
        if not running:
            state = "engine not running"
        else:
            state = "loaded" if entry.instanceId in loaded else "not loaded"
        table.add_row(
            escape(entry.instanceId),
            escape(entry.pluginId),
            "yes" if entry.enabled else "no",
            state,
        )
    if listing.configured:
        print_table(table, whole=("instance", "plugin"))
    else:
        console.print("no plugin instances configured")
    catalog = ", ".join(sorted(entry.id for entry in listing.catalog))
    console.print(f"available plugins: {escape(catalog)}", highlight=False)
    for failure in listing.failures:
        console.print(
            f"[yellow]{escape(failure.id)} failed to load:[/yellow] {escape(failure.message)}",
            highlight=False,
        )


def _settings_from(pairs: list[str] | None, raw_json: str | None) -> dict[str, Any] | None:
    if raw_json is None and not pairs:
        return None
    settings: dict[str, Any] = {}
    if raw_json is not None:
        try:
            loaded = json.loads(raw_json)
        except ValueError as exc:
            fail(f"--settings-json is not valid JSON: {exc}")
        if not isinstance(loaded, dict):
            fail("--settings-json must be a JSON object")
        settings.update(loaded)
    settings.update(parse_assignments(pairs, "--setting"))
    return settings


@app.command("load")
def load(
    plugin_id: Annotated[
        str,
        typer.Argument(help="The plugin to load, or its first characters (see `plugins list`)."),
    ],
    instance: Annotated[
        str | None, typer.Option("--instance", help="Instance id (default: the plugin id).")
    ] = None,
    setting: Annotated[
        list[str] | None, typer.Option("--setting", help="A setting as key=value; repeatable.")
    ] = None,
    settings_json: Annotated[
        str | None, typer.Option("--settings-json", help="All settings as a JSON object.")
    ] = None,
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Load a plugin instance (validated first, then saved in settings.json)."""
    settings = _settings_from(setting, settings_json)
    console.print(load_instance(home, plugin_id, instance, settings, remote))


def load_instance(
    home: Path | None,
    plugin_id: str,
    instance: str | None,
    settings: dict[str, Any] | None,
    remote: str | None = None,
) -> str:
    """Load an instance through the engine if it runs, else check it and save it in
    settings.json for the next start; returns what was done."""

    def online(client: EngineClient) -> str:
        def load_plugin(whole: str) -> PluginLoaded:
            body: dict[str, Any] = {"pluginId": whole, "instanceId": instance}
            if settings is not None:
                body["settings"] = settings
            return client.load_plugin(body)

        _, answer = through_prefix(
            plugin_id,
            load_plugin,
            lambda: [entry.id for entry in client.plugins().catalog],
            "plugin",
        )
        loaded = answer.plugin
        return f"loaded {loaded.id} ({loaded.name})"

    def offline(store: ConfigStore) -> str:
        return _save_offline(store, plugin_id, instance, settings)

    message, _ = mutate(home, remote, online=online, offline=offline)
    return message


def _save_offline(
    store: ConfigStore, plugin_id: str, instance_id: str | None, settings: dict[str, Any] | None
) -> str:
    """What the engine's load checks, applied to settings.json for the next start."""
    from claybot.plugins import PluginCatalog, PluginError
    from claybot.plugins.settings_file import PluginSettingsFile

    catalog = PluginCatalog.discover()
    if not any(known.startswith(plugin_id) for known in catalog.ids()):
        fail(
            f"unknown plugin {plugin_id!r} (installed: {', '.join(catalog.ids())})",
            error="unknown_plugin",
        )
    plugin_id = resolve_prefix(plugin_id, catalog.ids(), "plugin")
    plugins_file = PluginSettingsFile(store)
    try:
        entry = checked_instance(catalog, plugins_file.entries(), plugin_id, instance_id, settings)
        plugins_file.upsert(entry)
    except PluginError as exc:
        fail(exc.message, error=exc.code, field=exc.field)
    return f"saved {entry.instance_id} in settings.json; it loads when the engine starts"


def checked_instance(
    catalog: PluginCatalog,
    configured: list[PluginInstanceSettings],
    plugin_id: str,
    instance_id: str | None,
    settings: dict[str, Any] | None,
) -> PluginInstanceSettings:
    """The instance a load would save among the ``configured`` ones of settings.json,
    checked as the engine's load checks it (PluginError says why not). Enabled entries
    stand in for running instances: they load at the next start."""
    from claybot.plugins import InstanceIdTaken, PluginSettingsInvalid, UnknownPlugin
    from claybot.plugins.rules import (
        RunningInstance,
        check_exclusive,
        check_instance_id,
        default_instance_id,
    )

    definition = catalog.get(plugin_id)
    if definition is None:
        raise UnknownPlugin(plugin_id)
    entries = {entry.instance_id: entry for entry in configured}

    def is_free(candidate: str) -> bool:
        entry = entries.get(candidate)
        return entry is None or (entry.plugin_id == plugin_id and not entry.enabled)

    if instance_id is None:
        instance_id = plugin_id if definition.exclusive else default_instance_id(plugin_id, is_free)
    check_instance_id(instance_id)
    existing = entries.get(instance_id)
    if existing is not None and existing.plugin_id != plugin_id:
        raise InstanceIdTaken(instance_id, existing.plugin_id)
    others = []
    for entry in entries.values():
        if entry.enabled and entry.instance_id != instance_id:
            other = catalog.get(entry.plugin_id)
            exclusive = other is not None and other.exclusive
            others.append(RunningInstance(entry.instance_id, entry.plugin_id, exclusive))
    check_exclusive(plugin_id, definition.exclusive, others)
    if settings is None:  # like the engine: a configured instance keeps its settings
        settings = existing.settings if existing is not None else {}
    try:
        definition.settings_model.model_validate(settings)
        return PluginInstanceSettings(
            instance_id=instance_id, plugin_id=plugin_id, settings=settings
        )
    except ValidationError as exc:
        raise PluginSettingsInvalid(plugin_id, describe_validation_error(exc)) from None


@app.command("unload")
def unload(
    instance_id: Annotated[
        str, typer.Argument(help="The instance id, or its first characters (see `plugins list`).")
    ],
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Unload an instance; settings.json keeps it, disabled."""
    noun = "plugin instance"

    def online(client: EngineClient) -> str:
        whole, _ = through_prefix(
            instance_id,
            client.unload_plugin,
            lambda: [entry.instanceId for entry in client.plugins().configured],
            noun,
        )
        return f"unloaded {whole}"

    def offline(store: ConfigStore) -> str:
        current = store.read_settings()
        configured = {entry.instance_id: entry for entry in current.plugins}
        whole = resolve_prefix(instance_id, configured, noun)
        if not configured[whole].enabled:
            return f"{whole} is already disabled in settings.json"
        plugins = [
            p.model_copy(update={"enabled": False}) if p.instance_id == whole else p
            for p in current.plugins
        ]
        store.write_settings(current.model_copy(update={"plugins": plugins}))
        return f"disabled {whole} in settings.json; it stays stopped at the next start"

    message, _ = mutate(home, remote, online=online, offline=offline)
    console.print(message)


@app.command("info")
def info(
    plugin_id: Annotated[
        str, typer.Argument(help="The plugin's id, or its first characters (see `plugins list`).")
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """What a plugin is, and the settings it takes (from its settings schema)."""
    listing, _ = _listing(home)
    catalog = {entry.id: entry for entry in listing.catalog}
    if not any(known.startswith(plugin_id) for known in catalog):
        installed = ", ".join(sorted(catalog))
        fail(f"no plugin {plugin_id!r} is installed (installed: {installed})", error="not_found")
    plugin_id = resolve_prefix(plugin_id, catalog, "plugin")
    entry = catalog[plugin_id]
    if as_json:
        # No route answers for one plugin: shaped as the API's answers for one thing are.
        print_json({"plugin": answer_json(entry)})
        return
    kind = "built in" if entry.builtin else "installed"
    once = "; one instance at most" if entry.exclusive else ""
    console.print(f"[bold]{escape(entry.name)}[/bold] ({escape(plugin_id)}, {kind}{once})")
    console.print(escape(entry.description), highlight=False)
    # JSON Schema, not the model: the CLI has the engine's answer, not the plugin's code.
    schema = entry.settingsSchema or {}
    fields = schema.get("properties") or {}
    if not fields:
        console.print("settings: none")
    else:
        required = set(schema.get("required") or [])
        table = Table("setting", "type", "default", "description")
        for name, field in fields.items():
            default = "(required)" if name in required else json.dumps(field.get("default"))
            table.add_row(
                escape(name),
                escape(_type_of(field)),
                escape(default),
                escape(str(field.get("description", ""))),
            )
        print_table(table, whole=("setting",))  # a name to type in --setting KEY=VALUE
    instances = [c.instanceId for c in listing.configured if c.pluginId == plugin_id]
    if instances:
        console.print(f"configured instances: {escape(', '.join(instances))}", highlight=False)
    console.print(f"load it with `claybot plugins load {escape(plugin_id)} --setting KEY=VALUE`")


def _type_of(field: dict[str, Any]) -> str:
    if "type" in field:
        return str(field["type"])
    options = field.get("anyOf") or field.get("oneOf") or []
    return " | ".join(str(option.get("type", "?")) for option in options) or "any"
