"""A plugin stores and reads files through its PluginApi, never through the store itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from claybot.config.settings import FileSettings
from claybot.files.store import FileStore
from claybot.kernel.events import EventBus
from claybot.plugin_api import (
    CamelModel,
    FileMissing,
    FileRefused,
    InboundMessage,
    InstanceNotFound,
    PluginApi,
    PluginRegistrar,
    PostedMessage,
)
from claybot.plugins import Registries

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def plugin_api(store: FileStore) -> PluginApi[CamelModel]:
    async def post(_: InboundMessage) -> PostedMessage:
        raise AssertionError("not posted in these tests")

    return PluginApi(
        instance_id="p",
        plugin_id="p",
        settings=CamelModel(),
        data_dir=store.root.parent / "plugins" / "p",
        registrar=PluginRegistrar(Registries(), instance_id="p", plugin_id="p", plugin_name="P"),
        events=EventBus(),
        post_message=post,
        auth_lookup=lambda _: None,
        files=store,
    )


async def test_a_plugin_stores_reads_and_is_refused_files(tmp_path: Path) -> None:
    settings = FileSettings(max_file_bytes=4096, max_message_bytes=2048, quota_bytes=1024**2)
    store = FileStore(tmp_path / "files", settings)
    api = plugin_api(store)
    assert api.file_limit_bytes() == 2048  # the smaller of the two caps

    reference = await api.store_file(PNG, "../shot.png")
    assert (reference.name, reference.mimeType, reference.size) == ("shot.png", "image/png", 72)
    assert store.read(reference.id) == PNG
    assert await api.read_file(reference.id) == PNG

    with pytest.raises(FileRefused) as refused:
        await api.store_file(b"x" * 5000, "big.bin")
    assert refused.value.code == "file_too_large" and "files.maxFileBytes" in str(refused.value)
    with pytest.raises(FileMissing):
        await api.read_file("0" * 64)

    api.registrar.unregister_all()  # unloaded: its file access ends with it
    with pytest.raises(InstanceNotFound):
        await api.store_file(PNG, "late.png")
