"""Boot: every enabled instance in settings.json loads; a broken one is only reported."""

from __future__ import annotations

from claybot.plugins import PluginLoadFailed, UnknownPlugin
from tests.plugins.conftest import Harness

SETTINGS = {
    "plugins": [
        {"instanceId": "clock", "pluginId": "clock", "settings": {"timezone": "Europe/Paris"}},
        {"instanceId": "broken", "pluginId": "broken", "enabled": True},
        {"instanceId": "gone", "pluginId": "uninstalled-plugin", "enabled": True},
        {"instanceId": "bad-zone", "pluginId": "clock", "settings": {"timezone": "Nowhere/Land"}},
        {"instanceId": "echo", "pluginId": "echo", "enabled": True},
        {"instanceId": "echo-off", "pluginId": "echo", "enabled": False},
    ]
}


async def test_restore_loads_enabled_instances_and_survives_broken_ones(
    harness: Harness,
) -> None:
    harness.write_settings_json(SETTINGS)
    before = harness.home.settings.read_bytes()
    manager = harness.manager()

    await manager.restore()

    assert [summary["id"] for summary in manager.plugin_summaries()] == ["clock", "echo"]
    assert harness.registries.tools.names() == ["current_time"]
    assert harness.registries.connectors.ids() == ["echo"]
    assert set(manager.failures) == {"broken", "gone", "bad-zone"}
    assert isinstance(manager.failures["broken"].error, PluginLoadFailed)
    assert isinstance(manager.failures["gone"].error, UnknownPlugin)
    assert manager.failures["bad-zone"].error.field == "settings.timezone"
    failure = {item["id"]: item for item in manager.failure_summaries()}["broken"]
    assert failure["pluginId"] == "broken"
    assert failure["code"] == "plugin_load_failed"
    assert "the database refused the connection" in failure["message"]
    # Restoring changes nothing on disk: failed instances stay enabled for the next start.
    assert harness.home.settings.read_bytes() == before
    assert [event["id"] for event in harness.events_of("plugin.loaded")] == ["clock", "echo"]
    assert "echo-off" not in harness.calls.loads
    # What the broken instance registered before failing is gone.
    assert harness.registries.images.providers() == []


async def test_a_failed_instance_can_be_fixed_or_disabled(harness: Harness) -> None:
    harness.write_settings_json(SETTINGS)
    manager = harness.manager()
    await manager.restore()

    fixed = await manager.load("clock", "bad-zone", {"timezone": "Asia/Tokyo", "toolName": "tokyo"})
    await manager.unload("broken")

    assert fixed.instance_id == "bad-zone"
    assert "bad-zone" not in manager.failures
    assert "broken" not in manager.failures
    entries = {entry["instanceId"]: entry for entry in manager.configured()}
    assert entries["bad-zone"]["enabled"] is True
    assert entries["bad-zone"]["settings"] == {"timezone": "Asia/Tokyo", "toolName": "tokyo"}
    assert entries["broken"]["enabled"] is False


async def test_restore_then_shutdown_then_restore_again(harness: Harness) -> None:
    harness.write_settings_json({"plugins": SETTINGS["plugins"][:1]})
    manager = harness.manager()
    await manager.restore()
    await manager.shutdown()
    assert harness.registries.tools.names() == []

    again = harness.manager()
    await again.restore()
    assert [summary["id"] for summary in again.plugin_summaries()] == ["clock"]


async def test_an_exclusive_instance_in_settings_conflicts_at_restore(harness: Harness) -> None:
    harness.write_settings_json(
        {
            "plugins": [
                {"instanceId": "clock", "pluginId": "clock"},
                {"instanceId": "solo", "pluginId": "solo"},
            ]
        }
    )
    manager = harness.manager()
    await manager.restore()
    assert [summary["id"] for summary in manager.plugin_summaries()] == ["clock"]
    assert manager.failures["solo"].error.code == "exclusive_plugin_conflict"


async def test_restore_again_retries_only_what_is_not_running(harness: Harness) -> None:
    harness.write_settings_json(SETTINGS)
    manager = harness.manager()
    await manager.restore()
    loads = len(harness.calls.loads)

    await manager.restore()

    assert [summary["id"] for summary in manager.plugin_summaries()] == ["clock", "echo"]
    # Only the broken instance was tried again.
    assert harness.calls.loads[loads:] == ["broken"]


async def test_a_duplicated_instance_id_in_settings_is_reported(harness: Harness) -> None:
    harness.write_settings_json(
        {
            "plugins": [
                {"instanceId": "clock", "pluginId": "clock"},
                {
                    "instanceId": "clock",
                    "pluginId": "clock",
                    "settings": {"timezone": "Asia/Tokyo"},
                },
            ]
        }
    )
    manager = harness.manager()
    await manager.restore()
    assert [summary["id"] for summary in manager.plugin_summaries()] == ["clock"]
    assert manager.failures["clock"].error.code == "instance_already_loaded"
