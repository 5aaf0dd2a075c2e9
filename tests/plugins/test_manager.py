"""Loading and unloading instances: what is registered, saved and announced."""

from __future__ import annotations

import asyncio

import pytest

from claybot.config.settings import ProviderSettings
from claybot.plugin_api import PluginApi
from claybot.plugins import (
    ExclusivePluginConflict,
    InstanceAlreadyLoaded,
    InstanceIdTaken,
    InstanceNotFound,
    InvalidInstanceId,
    PluginLoadFailed,
    PluginSettingsInvalid,
    SettingsFileError,
    UnknownPlugin,
)
from claybot.providers.base import ProviderType
from claybot.providers.scripted import PROVIDER_TYPE as SCRIPTED
from claybot.tools.base import ToolContext
from tests.plugins.conftest import Harness

CONTEXT = ToolContext(agent_id="a1", agent_kind="user", message_id=None)


async def test_load_registers_persists_and_emits(harness: Harness) -> None:
    manager = harness.manager()

    loaded = await manager.load("clock", settings={"timezone": "Europe/Paris"})

    assert loaded.instance_id == "clock"
    tool = harness.registries.tools.get("current_time")
    assert tool is not None
    assert await tool.run(tool.parameters(), CONTEXT) == "2024-01-15T13:00:00+01:00"
    saved = harness.settings_json()
    assert saved is not None
    assert saved["plugins"] == [
        {
            "instanceId": "clock",
            "pluginId": "clock",
            "enabled": True,
            "settings": {"timezone": "Europe/Paris"},
        }
    ]
    assert harness.events_of("plugin.loaded") == [
        {"id": "clock", "pluginId": "clock", "name": "Clock"}
    ]
    assert manager.plugin_summaries() == [{"id": "clock", "pluginId": "clock", "name": "Clock"}]
    assert (harness.home.plugins / "clock").is_dir()


async def test_unload_removes_registrations_and_persists_disabled(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("clock", settings={"timezone": "Europe/Paris"})

    await manager.unload("clock")

    assert harness.registries.tools.names() == []
    assert manager.plugin_summaries() == []
    assert manager.configured() == [
        {
            "instanceId": "clock",
            "pluginId": "clock",
            "enabled": False,
            "settings": {"timezone": "Europe/Paris"},
        }
    ]
    assert harness.events_of("plugin.unloaded") == [{"id": "clock", "pluginId": "clock"}]
    with pytest.raises(InstanceNotFound) as raised:
        await manager.unload("clock")
    assert raised.value.field == "instanceId"


async def test_loading_an_unloaded_instance_again_keeps_its_settings(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("clock", settings={"timezone": "Europe/Paris"})
    await manager.unload("clock")

    loaded = await manager.load("clock")

    assert loaded.instance_id == "clock"
    assert manager.configured() == [
        {
            "instanceId": "clock",
            "pluginId": "clock",
            "enabled": True,
            "settings": {"timezone": "Europe/Paris"},
        }
    ]


async def test_only_given_settings_are_stored(harness: Harness) -> None:
    await harness.manager().load("clock")
    assert harness.settings_json()["plugins"][0]["settings"] == {}  # type: ignore[index]


async def test_settings_json_keeps_other_sections(harness: Harness) -> None:
    harness.write_settings_json(
        {"providers": [{"id": "scripted"}], "futureSection": {"x": 1}, "plugins": []}
    )
    await harness.manager().load("clock")
    saved = harness.settings_json()
    assert saved is not None
    assert saved["futureSection"] == {"x": 1}
    assert saved["providers"] == [ProviderSettings(id="scripted").to_json_dict()]


@pytest.mark.parametrize(
    ("settings", "field", "words"),
    [
        ({"timezone": "Mars/Olympus"}, "settings.timezone", "unknown time zone"),
        ({"timezone": "../../etc/passwd"}, "settings.timezone", "unknown time zone"),
        ({"timezone": 5}, "settings.timezone", "string"),
        ({"timezon": "UTC"}, "settings.timezon", "not permitted"),
        ({"toolName": "no spaces allowed"}, "settings.toolName", "pattern"),
    ],
)
async def test_bad_settings_are_refused_with_the_field_and_nothing_changes(
    harness: Harness, settings: dict[str, object], field: str, words: str
) -> None:
    manager = harness.manager()

    with pytest.raises(PluginSettingsInvalid) as raised:
        await manager.load("clock", settings=settings)

    assert raised.value.field == field
    assert raised.value.code == "invalid_settings"
    assert raised.value.http_status == 400
    assert words in raised.value.message
    assert harness.settings_json() is None
    assert harness.registries.tools.names() == []
    assert manager.plugin_summaries() == []
    assert harness.events_of("plugin.loaded") == []
    assert not (harness.home.plugins / "clock").exists()


async def test_unknown_plugin(harness: Harness) -> None:
    with pytest.raises(UnknownPlugin) as raised:
        await harness.manager().load("weather")
    assert raised.value.to_dict() == {
        "code": "unknown_plugin",
        "message": "no plugin with id 'weather' is installed",
        "field": "pluginId",
    }
    assert raised.value.http_status == 404
    assert harness.settings_json() is None


async def test_a_load_that_raises_leaves_nothing_behind(harness: Harness) -> None:
    manager = harness.manager()

    with pytest.raises(PluginLoadFailed) as raised:
        await manager.load("broken")

    error = raised.value
    assert error.kind == "error"
    assert "the database refused the connection" in error.reason
    assert error.to_dict()["code"] == "plugin_load_failed"
    assert harness.registries.tools.names() == []
    assert harness.registries.connectors.ids() == []
    assert harness.registries.images.providers() == []
    assert harness.settings_json() is None
    assert manager.plugin_summaries() == []
    assert harness.events_of("plugin.loaded") == []
    # unload() got its chance to clean up a half-finished load, and the data folder
    # it was given for this attempt is gone.
    assert harness.calls.unloads == ["broken"]
    assert not (harness.home.plugins / "broken").exists()


async def test_a_plugin_that_is_not_ready_says_so(harness: Harness) -> None:
    with pytest.raises(PluginLoadFailed) as raised:
        await harness.manager().load("broken", settings={"failure": "not_ready"})
    assert raised.value.kind == "not_ready"
    assert raised.value.http_status == 503
    assert "the server is not up yet" in raised.value.message
    assert harness.registries.tools.names() == []


async def test_a_load_that_hangs_times_out_and_leaves_nothing_behind(harness: Harness) -> None:
    manager = harness.manager(load_timeout_s=0.05)
    with pytest.raises(PluginLoadFailed) as raised:
        await manager.load("broken", settings={"failure": "hang"})
    assert raised.value.kind == "timeout"
    assert harness.registries.tools.names() == []
    assert harness.settings_json() is None


async def test_a_failing_create_is_a_load_failure(harness: Harness) -> None:
    from claybot.plugin_api import PluginDefinition
    from claybot.plugins import PluginCatalog
    from tests.plugins.fakes import NoSettings

    def create(api: object) -> object:
        raise KeyError("token")

    harness.catalog = PluginCatalog(
        [
            PluginDefinition(
                id="faulty",
                name="Faulty",
                description="",
                settings_model=NoSettings,
                create=create,  # type: ignore[arg-type]
            )
        ]
    )
    with pytest.raises(PluginLoadFailed, match="KeyError"):
        await harness.manager().load("faulty")
    assert harness.settings_json() is None


async def test_instance_ids_default_to_the_plugin_id_and_do_not_collide(
    harness: Harness,
) -> None:
    manager = harness.manager()

    first = await manager.load("echo")
    second = await manager.load("echo")
    third = await manager.load("echo", instance_id="support-bot")
    fourth = await manager.load("echo")

    assert [first.instance_id, second.instance_id, third.instance_id, fourth.instance_id] == [
        "echo",
        "echo-2",
        "support-bot",
        "echo-3",
    ]
    assert [entry["instanceId"] for entry in manager.configured()] == [
        "echo",
        "echo-2",
        "support-bot",
        "echo-3",
    ]


async def test_concurrent_loads_get_distinct_ids(harness: Harness) -> None:
    manager = harness.manager()
    loaded = await asyncio.gather(*(manager.load("echo") for _ in range(3)))
    assert sorted(item.instance_id for item in loaded) == ["echo", "echo-2", "echo-3"]


async def test_default_id_skips_an_id_configured_for_another_plugin(harness: Harness) -> None:
    harness.write_settings_json(
        {"plugins": [{"instanceId": "echo", "pluginId": "clock", "enabled": False}]}
    )
    loaded = await harness.manager().load("echo")
    assert loaded.instance_id == "echo-2"


async def test_explicit_instance_id_checks(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("echo", instance_id="bot")

    with pytest.raises(InstanceAlreadyLoaded) as already:
        await manager.load("echo", instance_id="bot")
    assert already.value.http_status == 409
    with pytest.raises(InstanceIdTaken):
        await manager.load("clock", instance_id="bot")
    for bad in ("../x", "-x", "a b", "x" * 65, "", "local", "webchat"):
        with pytest.raises(InvalidInstanceId) as invalid:
            await manager.load("echo", instance_id=bad)
        assert invalid.value.field == "instanceId"
    assert [entry["instanceId"] for entry in manager.configured()] == ["bot"]


async def test_an_exclusive_plugin_runs_alone(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("clock")
    with pytest.raises(ExclusivePluginConflict):
        await manager.load("solo")

    await manager.unload("clock")
    await manager.load("solo")
    with pytest.raises(ExclusivePluginConflict):
        await manager.load("clock")
    # An exclusive plugin has one instance, under its bare id.
    with pytest.raises(InstanceAlreadyLoaded):
        await manager.load("solo")


async def test_registrations_never_take_over_existing_ones(harness: Harness) -> None:
    harness.registries.providers.register(SCRIPTED)
    from claybot.plugin_api import PluginDefinition
    from claybot.plugins import PluginCatalog
    from tests.plugins.fakes import NoSettings, QuietPlugin

    class Hijacker(QuietPlugin):
        def __init__(self, api: object) -> None:
            self.api = api

        async def load(self) -> None:
            self.api.registrar.register_inference_provider(  # type: ignore[attr-defined]
                ProviderType(type="scripted", label="mine", create=SCRIPTED.create)
            )

    harness.catalog = PluginCatalog(
        [
            PluginDefinition(
                id="hijack",
                name="Hijack",
                description="",
                settings_model=NoSettings,
                create=Hijacker,
            )
        ]
    )
    with pytest.raises(PluginLoadFailed, match="already registered"):
        await harness.manager().load("hijack")
    assert harness.registries.providers.get("scripted") is SCRIPTED


async def test_a_second_clock_needs_its_own_tool_name(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("clock")

    with pytest.raises(PluginLoadFailed, match="current_time"):
        await manager.load("clock", settings={"timezone": "Asia/Tokyo"})
    paris = await manager.load(
        "clock", instance_id="tokyo", settings={"timezone": "Asia/Tokyo", "toolName": "time_tokyo"}
    )

    assert paris.instance_id == "tokyo"
    assert harness.registries.tools.names() == ["current_time", "time_tokyo"]
    tool = harness.registries.tools.get("time_tokyo")
    assert tool is not None
    assert await tool.run(tool.parameters(), CONTEXT) == "2024-01-15T21:00:00+09:00"


async def test_an_unreadable_settings_file_refuses_the_load(harness: Harness) -> None:
    harness.home.settings.write_text("{not json")
    manager = harness.manager()
    with pytest.raises(SettingsFileError):
        await manager.load("clock")
    assert harness.registries.tools.names() == []
    assert harness.home.settings.read_text() == "{not json"


async def test_plugin_events_and_auth(harness: Harness) -> None:
    from claybot.config.auth import AuthEntry, AuthFile

    harness.config.write_auth(
        AuthFile({"echo": AuthEntry.model_validate({"type": "token", "token": "t1"})})
    )
    manager = harness.manager()
    await manager.load("echo", settings={"greeting": "hi"})

    assert harness.events_of("plugin.event") == [
        {"instanceId": "echo", "pluginId": "echo", "type": "ready", "payload": {"greeting": "hi"}}
    ]
    api = harness.echoes["echo"].api
    entry = api.auth()
    assert entry is not None and entry.secret("token") == "t1"
    assert api.data_dir == harness.home.plugins / "echo"
    assert api.logger.name == "claybot.plugin_api.echo"


async def test_shutdown_unloads_everything_and_keeps_settings(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("clock")
    await manager.load("echo")
    before = harness.home.settings.read_bytes()

    await manager.shutdown()

    assert manager.plugin_summaries() == []
    assert harness.registries.tools.names() == []
    assert harness.registries.connectors.ids() == []
    assert harness.home.settings.read_bytes() == before
    assert harness.calls.unloads == ["echo"]
    assert harness.echoes["echo"].connector.stopped


async def test_a_cancelled_load_cleans_up_and_releases_the_manager(harness: Harness) -> None:
    manager = harness.manager()
    task = asyncio.create_task(manager.load("broken", settings={"failure": "hang"}))
    for _ in range(10):  # let the load run until it hangs
        await asyncio.sleep(0)
    assert harness.calls.loads == ["broken"]

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert harness.registries.tools.names() == []
    assert harness.registries.connectors.ids() == []
    assert harness.settings_json() is None
    await asyncio.wait_for(manager.load("clock"), 1)


async def test_an_unload_that_fails_still_unloads(harness: Harness) -> None:
    from claybot.plugin_api import PluginDefinition
    from claybot.plugins import PluginCatalog
    from tests.plugins.fakes import NoSettings, tool

    class Stubborn:
        def __init__(self, api: PluginApi[NoSettings]) -> None:
            self.api = api

        async def load(self) -> None:
            self.api.registrar.register_tool(tool("stubborn"))

        async def unload(self) -> None:
            raise RuntimeError("cannot stop")

    harness.catalog = PluginCatalog(
        [
            PluginDefinition(
                id="stubborn",
                name="Stubborn",
                description="",
                settings_model=NoSettings,
                create=Stubborn,
            )
        ]
    )
    manager = harness.manager()
    await manager.load("stubborn")

    await manager.unload("stubborn")

    assert harness.registries.tools.names() == []
    assert manager.configured()[0]["enabled"] is False


async def test_follow_runs_what_an_edited_settings_file_says(harness: Harness) -> None:
    """``follow`` (``POST /v1/engine/reload``): settings.json edited behind the engine's
    back is what runs: a removed instance stops, one with new settings starts again with
    them, a new enabled one loads, and the file itself is left as it was written."""
    manager = harness.manager()
    await manager.load("clock", settings={"timezone": "Europe/Paris"})
    await manager.load("clock", "clock-b", settings={"toolName": "time_b"})
    edited = {
        "plugins": [
            {"instanceId": "clock", "pluginId": "clock", "settings": {"timezone": "UTC"}},
            {"instanceId": "clock-c", "pluginId": "clock", "settings": {"toolName": "time_c"}},
        ]
    }
    harness.write_settings_json(edited)

    await manager.follow(harness.config.read_settings())

    assert [p["id"] for p in manager.plugin_summaries()] == ["clock", "clock-c"]
    assert sorted(harness.registries.tools.names()) == ["current_time", "time_c"]
    tool = harness.registries.tools.get("current_time")
    assert tool is not None
    assert await tool.run(tool.parameters(), CONTEXT) == "2024-01-15T12:00:00+00:00"
    assert [e["id"] for e in harness.events_of("plugin.unloaded")] == ["clock", "clock-b"]
    assert harness.settings_json() == edited

    await manager.follow(harness.config.read_settings())  # nothing changed: nothing moves
    assert [e["id"] for e in harness.events_of("plugin.unloaded")] == ["clock", "clock-b"]
