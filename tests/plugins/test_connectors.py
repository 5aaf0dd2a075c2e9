"""Connector plugins register under their instance id, so each bot answers for itself."""

from __future__ import annotations

import pytest

from claybot.connectors.base import InboundMessage
from claybot.plugins import InstanceNotFound, PluginRegistrar, RegistrationError
from tests.plugins.conftest import Harness
from tests.plugins.fakes import EchoConnector


async def test_two_instances_of_one_connector_plugin_stay_apart(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("echo", settings={"greeting": "first"})
    await manager.load("echo", settings={"greeting": "second"})

    first = harness.echoes["echo"].connector
    second = harness.echoes["echo-2"].connector
    assert harness.registries.connectors.get("echo") is first
    assert harness.registries.connectors.get("echo-2") is second

    await first.receive("alice", "hi from bot one")
    posted = await second.receive("alice", "hi from bot two")

    assert [(message.connector, message.text) for message in harness.posted] == [
        ("echo", "hi from bot one"),
        ("echo-2", "hi from bot two"),
    ]
    assert posted.agent_id == "agent-echo-2"
    assert manager.connector_summaries() == [
        {"id": "echo", "pluginId": "echo", "name": "Echo", "loadedAt": "2024-01-15T12:00:00Z"},
        {"id": "echo-2", "pluginId": "echo", "name": "Echo", "loadedAt": "2024-01-15T12:00:00Z"},
    ]

    await manager.unload("echo")
    assert harness.registries.connectors.ids() == ["echo-2"]
    assert first.stopped and not second.stopped


async def test_a_connector_must_use_its_instance_id(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("echo")
    api = harness.echoes["echo"].api

    with pytest.raises(RegistrationError, match="must be the plugin instance id"):
        api.registrar.register_connector(EchoConnector("telegram", api))
    with pytest.raises(ValueError, match="must be the plugin instance id"):
        await api.post_message(
            InboundMessage(connector="echo-2", user_id="u", channel_id="u", text="x")
        )
    assert harness.posted == []


async def test_an_unloaded_connector_can_no_longer_post_or_register(harness: Harness) -> None:
    manager = harness.manager()
    await manager.load("echo")
    plugin = harness.echoes["echo"]
    await manager.unload("echo")

    with pytest.raises(InstanceNotFound):
        await plugin.connector.receive("alice", "late update")
    with pytest.raises(RegistrationError):
        plugin.api.registrar.register_connector(plugin.connector)
    assert harness.posted == []
    assert harness.registries.connectors.ids() == []


async def test_unregister_all_undoes_only_that_instance(harness: Harness) -> None:
    from tests.plugins.fakes import tool

    one = PluginRegistrar(harness.registries, instance_id="one", plugin_id="p", plugin_name="P")
    two = PluginRegistrar(harness.registries, instance_id="two", plugin_id="p", plugin_name="P")
    one.register_tool(tool("a"))
    two.register_tool(tool("b"))
    one.unregister_tool("b")  # not one's to remove
    assert harness.registries.tools.names() == ["a", "b"]

    one.unregister_all()

    assert harness.registries.tools.names() == ["b"]
    assert one.registrations() == []
    assert [r.key for r in two.registrations()] == ["b"]
