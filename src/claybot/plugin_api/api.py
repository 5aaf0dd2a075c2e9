"""``PluginApi``: everything a plugin instance is given, and nothing more.

A plugin gets its own settings, its own data folder, its own credentials and a
registrar scoped to itself, instead of the engine: it can add connectors, tools
and providers, hand inbound messages to the engine, store and read the files those
messages carry, and emit events, and that is all it can reach.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from claybot.config.auth import AuthEntry
from claybot.connectors.base import ConversationControl, InboundMessage, PostedMessage, PostInbound
from claybot.files.reference import FileReference
from claybot.files.store import FileNotFound, FileStore
from claybot.kernel.errors import ClayError
from claybot.kernel.event_types import EventType
from claybot.kernel.events import EventBus
from claybot.permissions.prompts import PermissionOutcome
from claybot.plugin_api.errors import FileMissing, FileRefused, InstanceNotFound
from claybot.plugin_api.registrar import PluginRegistrar
from claybot.sandbox import Sandbox

S = TypeVar("S", bound=BaseModel)

AuthLookup = Callable[[str], AuthEntry | None]

PLUGIN_EVENT = EventType.PLUGIN_EVENT


@dataclass(frozen=True)
class _InstancePoster:
    """``post_message`` for one instance: only as that connector, only while loaded."""

    instance_id: str
    registrar: PluginRegistrar
    post: PostInbound

    async def __call__(self, message: InboundMessage) -> PostedMessage:
        if self.registrar.closed:
            raise InstanceNotFound(self.instance_id, "is unloaded; its messages are refused")
        if message.connector != self.instance_id:
            # Replies are routed by this field; anything but the instance id would
            # send the answer through another instance's connector.
            raise ValueError(
                f"inbound message connector {message.connector!r} must be the plugin "
                f"instance id {self.instance_id!r}"
            )
        return await self.post(message)


class PluginApi(Generic[S]):
    def __init__(
        self,
        *,
        instance_id: str,
        plugin_id: str,
        settings: S,
        data_dir: Path,
        registrar: PluginRegistrar,
        events: EventBus,
        post_message: PostInbound,
        auth_lookup: AuthLookup,
        control: ConversationControl | None = None,
        sandbox: Sandbox | None = None,
        files: FileStore | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.plugin_id = plugin_id
        self.settings = settings
        self.data_dir = data_dir
        self.registrar = registrar
        self.post_message: PostInbound = _InstancePoster(instance_id, registrar, post_message)
        self.logger = logging.getLogger(f"claybot.plugin_api.{instance_id}")
        self._events = events
        self._auth_lookup = auth_lookup
        self._control = control
        self._files = files
        # Where commands run confined; the engine shares one (probed once) with its gates.
        # The instance's data folder is <home>/plugins/<instanceId>.
        self.sandbox = sandbox or Sandbox(data_dir.parent.parent)

    def _controlled(self) -> ConversationControl:
        if self.registrar.closed:
            raise InstanceNotFound(self.instance_id, "is unloaded; its requests are refused")
        if self._control is None:
            raise RuntimeError("this engine offers no conversation control to plugins")
        return self._control

    async def reset_conversation(
        self, user_id: str, channel_id: str, command_id: str | None = None
    ) -> bool:
        """``/reset``: clear this connector conversation's context (once per ``command_id``)."""
        return await self._controlled().reset_conversation(
            self.instance_id, user_id, channel_id, command_id
        )

    async def stop_conversation(self, user_id: str, channel_id: str) -> bool:
        """``/stop``: abort the turn running for this connector conversation."""
        return await self._controlled().stop_conversation(self.instance_id, user_id, channel_id)

    async def decide_permission(self, request_id: str, approved: bool) -> PermissionOutcome:
        """The user pressed Allow or Deny on a prompt this connector showed."""
        return await self._controlled().decide_permission(self.instance_id, request_id, approved)

    # -- files ----------------------------------------------------------------------

    def _store(self) -> FileStore:
        if self.registrar.closed:
            raise InstanceNotFound(self.instance_id, "is unloaded; its files are refused")
        if self._files is None:
            raise RuntimeError("this engine offers no file store to plugins")
        return self._files

    def file_limit_bytes(self) -> int:
        """The largest file one inbound message may carry (``files.maxFileBytes`` and
        ``files.maxMessageBytes``, read now): check it before downloading."""
        settings = self._store().settings
        return min(settings.max_file_bytes, settings.max_message_bytes)

    async def store_file(self, data: bytes, name: str) -> FileReference:
        """Store a file (durably, once per content) for an ``InboundMessage.files``.

        ``FileRefused`` when it is too large or the store's quota is full.
        """
        store = self._store()
        try:
            return await asyncio.to_thread(store.put, data, name)
        except ClayError as exc:
            if exc.status != 413:
                raise
            raise FileRefused(exc.message, code=exc.code) from None

    async def read_file(self, file_id: str) -> bytes:
        """A stored file's bytes (an ``OutgoingMessage.files`` entry's); ``FileMissing``
        when the store has no such file."""
        store = self._store()
        try:
            return await asyncio.to_thread(store.read, file_id)
        except FileNotFound:
            raise FileMissing(file_id) from None

    def auth(self) -> AuthEntry | None:
        """This instance's auth.json entry, read now (so `auth set` applies without a reload)."""
        return self._auth_lookup(self.instance_id)

    def emit(self, type: str, payload: dict[str, Any] | None = None) -> None:
        self._events.emit(
            PLUGIN_EVENT,
            {
                "instanceId": self.instance_id,
                "pluginId": self.plugin_id,
                "type": type,
                "payload": payload or {},
            },
        )
