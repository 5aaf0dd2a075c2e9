"""Small plugins for the tests: a connector, one that fails, one that hangs, one exclusive."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from claybot.plugin_api import (
    ImageProvider,
    InboundMessage,
    OutgoingMessage,
    PluginApi,
    PluginDefinition,
    PluginNotReady,
    PostedMessage,
    ToolContext,
    ToolDefinition,
)


class NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def _ok(arguments: BaseModel, context: ToolContext) -> str:
    return "ok"


def tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, description=name, parameters=NoArguments, run=_ok)


@dataclass
class Calls:
    """What the fake plugins were asked to do, for assertions."""

    loads: list[str] = field(default_factory=list)
    unloads: list[str] = field(default_factory=list)


# -- a connector plugin -------------------------------------------------------------


class EchoConnector:
    def __init__(self, connector_id: str, api: PluginApi[Any]) -> None:
        self._id = connector_id
        self._api = api
        self.sent: list[OutgoingMessage] = []
        self.stopped = False

    @property
    def id(self) -> str:
        return self._id

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)

    async def stop(self) -> None:
        self.stopped = True

    async def receive(self, user_id: str, text: str) -> PostedMessage:
        """What a platform update turns into: an inbound message posted to the engine."""
        return await self._api.post_message(
            InboundMessage(connector=self.id, user_id=user_id, channel_id=user_id, text=text)
        )


class EchoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    greeting: str = "hello"


class EchoPlugin:
    def __init__(self, api: PluginApi[EchoSettings], calls: Calls) -> None:
        self.api = api
        self.calls = calls
        self.connector = EchoConnector(api.instance_id, api)

    async def load(self) -> None:
        self.calls.loads.append(self.api.instance_id)
        self.api.registrar.register_connector(self.connector)
        self.api.emit("ready", {"greeting": self.api.settings.greeting})

    async def unload(self) -> None:
        self.calls.unloads.append(self.api.instance_id)
        await self.connector.stop()


def echo_definition(calls: Calls, instances: dict[str, EchoPlugin]) -> PluginDefinition[Any]:
    def create(api: PluginApi[EchoSettings]) -> EchoPlugin:
        plugin = EchoPlugin(api, calls)
        instances[api.instance_id] = plugin
        return plugin

    return PluginDefinition(
        id="echo",
        name="Echo",
        description="a connector that records what it sends",
        settings_model=EchoSettings,
        create=create,
    )


# -- a plugin whose load fails after registering things ----------------------------------


class FakeImages:
    id = "fake-images"
    label = "Fake images"

    async def generate(self, prompt: str, *, size: str | None = None) -> list[bytes]:
        return [b""]


class BrokenSettings(BaseModel):
    failure: str = "crash"  # "crash" | "not_ready" | "hang"


class BrokenPlugin:
    def __init__(self, api: PluginApi[BrokenSettings], calls: Calls) -> None:
        self.api = api
        self.calls = calls

    async def load(self) -> None:
        self.calls.loads.append(self.api.instance_id)
        self.api.registrar.register_tool(tool("broken_tool"))
        self.api.registrar.register_connector(EchoConnector(self.api.instance_id, self.api))
        images: ImageProvider = FakeImages()
        self.api.registrar.register_image_provider(images)
        (self.api.data_dir / "partial.txt").write_text("half done")
        if self.api.settings.failure == "not_ready":
            raise PluginNotReady("the server is not up yet")
        if self.api.settings.failure == "hang":
            await asyncio.Event().wait()
        raise RuntimeError("the database refused the connection")

    async def unload(self) -> None:
        self.calls.unloads.append(self.api.instance_id)


def broken_definition(calls: Calls) -> PluginDefinition[Any]:
    return PluginDefinition(
        id="broken",
        name="Broken",
        description="registers a tool, a connector and an image provider, then fails",
        settings_model=BrokenSettings,
        create=lambda api: BrokenPlugin(api, calls),
    )


# -- an exclusive plugin ----------------------------------------------------------------


class QuietPlugin:
    async def load(self) -> None:
        return None

    async def unload(self) -> None:
        return None


def solo_definition() -> PluginDefinition[Any]:
    return PluginDefinition(
        id="solo",
        name="Solo",
        description="must run alone",
        settings_model=NoSettings,
        create=lambda api: QuietPlugin(),
        exclusive=True,
    )
