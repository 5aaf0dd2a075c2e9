"""Images through the OpenAI-compatible door, sent by the official SDK in-process: a
data-URL image part is stored, carried by the message as a file and reaches the model
as an image part; a web address, something that is not an image and a file over the
store's caps are refused in OpenAI's shape."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.server.app import create_app
from tests.api.test_openai_door import SETTINGS
from tests.conftest import write_settings
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer
from tests.providers.test_request_bodies import PNG

PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 200


@asynccontextmanager
async def sdk(
    paths: HomePaths, settings: dict[str, Any]
) -> AsyncIterator[tuple[Engine, openai.AsyncOpenAI]]:
    """The SDK with a ``chat`` key, talking to an engine's app in-process as over TCP."""
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    try:
        _, key = await engine.keys.create("sdk", ("chat",), rate_limit_rpm=10_000)
        app = ApiKeyMiddleware(create_app(engine), engine.keys)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://tcp", timeout=30
        ) as http:
            client = openai.AsyncOpenAI(
                base_url="http://tcp/v1", api_key=key, http_client=http, max_retries=0
            )
            yield engine, client
    finally:
        await engine.stop(drain_timeout_s=2)


def said(text: str | None, *urls: str) -> list[Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return [{"role": "user", "content": parts}]


async def user_records(engine: Engine, agent_id: str) -> list[dict[str, Any]]:
    page = await engine.agents.histories.page(agent_id, after=None, before=None, limit=100)
    return [record for record in page.records if record["type"] == "user_message"]


async def test_an_image_part_is_stored_and_reaches_the_model_as_an_image(
    paths: HomePaths,
) -> None:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        provider = {"id": "o", "type": "openai", "model": "gpt-fake",
                    "options": {"baseUrl": vendor.api_base, "maxRetries": 0}}  # fmt: skip
        vendor.reply_text("A map of Zürich.")
        async with sdk(paths, {"providers": [provider], "heartbeat": {"enabled": False}}) as (
            engine,
            client,
        ):
            answer = await client.chat.completions.create(
                model="claybot", messages=said("What is this?", PNG_URL)
            )
            assert answer.choices[0].message.content == "A map of Zürich."
            agent_id = (answer.model_extra or {})["claybot"]["agentId"]
            (record,) = await user_records(engine, agent_id)
            (file,) = record["files"]
            assert record["text"] == "What is this?"
            assert file["id"] == hashlib.sha256(PNG).hexdigest()
            assert (file["name"], file["mimeType"]) == ("image-0-1.png", "image/png")
            assert engine.files.exists(file["id"])
            text, image = vendor.requests[0].body["messages"][-1]["content"]
            assert text["text"].startswith("What is this?\n\n[Attached file: image-0-1.png")
            assert image["image_url"]["url"] == PNG_URL


async def test_an_image_alone_is_a_message(paths: HomePaths) -> None:
    async with sdk(paths, SETTINGS) as (engine, client):
        answer = await client.chat.completions.create(model="claybot", messages=said(None, PNG_URL))
        assert answer.choices[0].message.content == "Noted."
        agent_id = (answer.model_extra or {})["claybot"]["agentId"]
        (record,) = await user_records(engine, agent_id)
        assert record["text"] == "" and record["files"][0]["mimeType"] == "image/png"


@pytest.mark.parametrize(
    ("url", "told"),
    [
        ("https://example.com/cat.png", "a web address, which the engine does not fetch"),
        ("http://127.0.0.1:1/x.png", "a web address, which the engine does not fetch"),
        ("ftp://x/y.png", "not a base64 data URL"),
        ("data:image/png,rawbytes", "not a base64 data URL"),
        ("data:image/png;base64,@@@", "not valid base64"),
        ("data:image/png;base64," + base64.b64encode(ELF).decode(), "not an image"),
    ],
)
async def test_what_is_not_an_inline_image_is_refused(
    paths: HomePaths, url: str, told: str
) -> None:
    async with sdk(paths, SETTINGS) as (engine, client):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="claybot", messages=said("Look", url))
        error = refused.value.body
        assert isinstance(error, dict)
        assert error["code"] == "unsupported_content" and error["param"] == "messages.0.content.1"
        assert told in error["message"]
        assert engine.agents.listings.conversations("openai") == []  # nothing was said


async def test_images_past_the_stores_caps_are_413_in_openai_shape(paths: HomePaths) -> None:
    settings = {**SETTINGS, "files": {"maxFileBytes": 1024, "maxMessageBytes": 1500}}
    big = "data:image/png;base64," + base64.b64encode(PNG + b"\x00" * 2000).decode()
    near = "data:image/png;base64," + base64.b64encode(PNG + b"\x00" * (1000 - len(PNG))).decode()
    async with sdk(paths, settings) as (_, client):
        with pytest.raises(openai.APIStatusError) as too_big:
            await client.chat.completions.create(model="claybot", messages=said("Big", big))
        assert too_big.value.status_code == 413
        error = too_big.value.body
        assert isinstance(error, dict) and error["code"] == "file_too_large"
        assert error["param"] == "messages.0.content.1" and "files.maxFileBytes" in error["message"]
        with pytest.raises(openai.APIStatusError) as together:
            await client.chat.completions.create(model="claybot", messages=said("Two", near, near))
        assert together.value.status_code == 413
        assert isinstance(together.value.body, dict)
        assert "files.maxMessageBytes" in together.value.body["message"]


async def test_an_image_the_agent_holds_is_not_stored_again(paths: HomePaths) -> None:
    """A resent conversation's earlier images are the agent's already: only the new
    messages' images are read (an earlier one may even be a web address now)."""
    async with sdk(paths, SETTINGS) as (engine, client):
        first = await client.chat.completions.create(
            model="claybot", messages=said("What is this?", PNG_URL)
        )
        agent_id = (first.model_extra or {})["claybot"]["agentId"]
        resent: list[Any] = [
            *said("What is this?", "https://example.com/was-inline.png"),
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "Thanks"},
        ]
        await client.chat.completions.create(model="claybot", messages=resent)
        records = await user_records(engine, agent_id)
        assert [r["text"] for r in records] == ["What is this?", "Thanks"]
        assert [len(r["files"]) for r in records] == [1, 0]
