"""``claybot plugins list | load | unload``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    RemoteOption,
    console,
    fail,
    mutate,
    print_json,
    running_engine,
)
from claybot.cli.options import parse_assignments
from claybot.config.settings import PluginInstanceSettings
from claybot.config.store import describe_validation_error

if TYPE_CHECKING:
    from claybot.config.store import ConfigStore
    from claybot.engine.ipc.client import EngineClient

app = typer.Typer(help="Plugin instances: list, load, unload.", no_args_is_help=True)


@app.command("list")
def list_plugins(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Loaded and configured instances, and the plugins that can be loaded."""
    with running_engine(home) as client:
        listing = client.get("/v1/engine/plugins")
    if as_json:
        print_json(listing)
        return
    loaded = {entry["id"] for entry in listing["loaded"]}
    table = Table("instance", "plugin", "enabled", "state")
    for entry in listing["configured"]:
        state = "loaded" if entry["instanceId"] in loaded else "not loaded"
        table.add_row(
            entry["instanceId"], entry["pluginId"], str(entry.get("enabled", True)), state
        )
    console.print(table)
    catalog = ", ".join(sorted(entry["id"] for entry in listing["catalog"]))
    console.print(f"available plugins: {catalog}")
    for failure in listing.get("failures", []):
        console.print(f"[yellow]failed at boot:[/yellow] {failure}")


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
    plugin_id: Annotated[str, typer.Argument(help="The plugin to load (see `plugins list`).")],
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

    def online(client: EngineClient) -> str:
        body: dict[str, Any] = {"pluginId": plugin_id, "instanceId": instance}
        if settings is not None:
            body["settings"] = settings
        loaded = client.post("/v1/engine/plugins/load", body)["plugin"]
        return f"loaded {loaded['id']} ({loaded['name']})"

    def offline(store: ConfigStore) -> str:
        from claybot.engine.plugins import PluginCatalog

        definition = PluginCatalog.discover().get(plugin_id)
        if definition is None:
            fail(f"unknown plugin {plugin_id!r}")
        try:
            definition.settings_model.model_validate(settings or {})
            entry = PluginInstanceSettings(
                instance_id=instance or plugin_id, plugin_id=plugin_id, settings=settings or {}
            )
        except ValidationError as exc:
            fail(f"invalid settings: {describe_validation_error(exc)}")
        current = store.read_settings()
        others = [p for p in current.plugins if p.instance_id != entry.instance_id]
        store.write_settings(current.model_copy(update={"plugins": [*others, entry]}))
        return f"saved {entry.instance_id} in settings.json; it loads when the engine starts"

    message, _ = mutate(home, remote, online=online, offline=offline)
    console.print(message)


@app.command("unload")
def unload(
    instance_id: Annotated[str, typer.Argument(help="The instance id.")],
    home: HomeOption = None,
    remote: RemoteOption = None,
) -> None:
    """Unload an instance; settings.json keeps it, disabled."""

    def online(client: EngineClient) -> str:
        client.post("/v1/engine/plugins/unload", {"instanceId": instance_id})
        return f"unloaded {instance_id}"

    def offline(store: ConfigStore) -> str:
        current = store.read_settings()
        if not any(p.instance_id == instance_id for p in current.plugins):
            fail(f"no plugin instance {instance_id!r} in settings.json")
        plugins = [
            p.model_copy(update={"enabled": False}) if p.instance_id == instance_id else p
            for p in current.plugins
        ]
        store.write_settings(current.model_copy(update={"plugins": plugins}))
        return f"disabled {instance_id} in settings.json"

    message, _ = mutate(home, remote, online=online, offline=offline)
    console.print(message)
