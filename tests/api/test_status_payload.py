"""Seed 000's status payload: named entities, the same meaning in every list."""

from __future__ import annotations

from claybot.config.home import HomePaths
from tests.conftest import ECHO_SETTINGS, running_engine, write_settings


class Painter:
    """An image provider as a plugin registers one."""

    id = "painter"
    label = "Painter (test)"

    async def generate(self, prompt: str, *, size: str | None = None) -> list[bytes]:
        return [b"png"]


async def test_a_provider_that_is_not_built_is_labelled_as_a_built_one_would_be(
    paths: HomePaths,
) -> None:
    settings = {
        **ECHO_SETTINGS,
        "providers": [
            *ECHO_SETTINGS["providers"],
            {"id": "spare", "type": "scripted", "model": "script", "enabled": False},
            {"id": "vendor", "type": "openai", "model": "gpt-4o", "enabled": False},
        ],
    }
    write_settings(paths, settings)
    async with running_engine(paths) as (engine, api, _):
        engine.registries.images.register(Painter())
        body = (await api.get("/v1/engine/status")).json()
    labels = {p["id"]: (p["name"], p["label"], p["type"]) for p in body["providers"]}
    assert labels == {
        "scripted": ("scripted", "Scripted (echo)", "scripted"),
        "spare": ("spare", "Scripted (script)", "scripted"),
        "vendor": ("vendor", "OpenAI-compatible (gpt-4o)", "openai"),
    }
    assert [(p["id"], p["name"], p["label"]) for p in body["inferenceProviders"]] == [
        ("scripted", "scripted", "Scripted (echo)")
    ]
    assert body["imageProviders"] == [
        {"id": "painter", "name": "painter", "label": "Painter (test)"}
    ]
