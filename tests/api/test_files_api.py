"""Files through the socket API: stored (once, typed by content, capped), carried by a
message to its agent (a file it can read; an image part for a vision provider), and
served back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.history import user_message
from claybot.config.home import HomePaths
from claybot.engine.engine import Engine
from claybot.providers.base import Attachment, InferenceRequest
from claybot.providers.local import to_chat
from tests.conftest import running_engine, write_settings
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer
from tests.providers.test_request_bodies import PNG

ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 200


async def upload(api: httpx.AsyncClient, name: str, data: bytes) -> httpx.Response:
    return await api.post("/v1/engine/files", files={"file": (name, data, "image/png")})


async def history_of(engine: Engine, agent_id: str) -> list[dict[str, Any]]:
    page = await engine.agents.histories.page(agent_id, after=None, before=None, limit=100)
    return page.records


async def test_a_file_is_stored_once_and_typed_by_its_content(paths: HomePaths) -> None:
    write_settings(paths, {"providers": [{"id": "scripted", "model": "echo"}]})
    async with running_engine(paths) as (_, api, _):
        first = await upload(api, "x.png", ELF)
        assert first.status_code == 201, first.text
        stored = first.json()["file"]
        assert stored["mimeType"] == "application/x-executable"  # not what its name says
        assert stored["name"] == "x.png" and stored["size"] == len(ELF)
        again = await upload(api, "copy.png", ELF)
        assert again.json()["file"]["id"] == stored["id"]
        blobs = [p for p in (paths.files / "blobs").rglob("*") if p.is_file()]
        assert len(blobs) == 1  # the same upload twice is stored once

        served = await api.get(f"/v1/engine/files/{stored['id']}", params={"name": "x.png"})
        assert served.status_code == 200 and served.content == ELF
        # Not an image: a download, never something the browser runs or shows.
        assert served.headers["content-type"] == "application/octet-stream"
        assert served.headers["content-disposition"].startswith("attachment")
        picture = (await upload(api, "map.png", PNG)).json()["file"]
        shown = await api.get(f"/v1/engine/files/{picture['id']}")
        assert shown.headers["content-type"] == "image/png"
        assert shown.headers["content-disposition"].startswith("inline")
        assert (await api.get(f"/v1/engine/files/{'0' * 64}")).status_code == 404


async def test_caps_are_413s_that_name_their_setting(paths: HomePaths) -> None:
    write_settings(
        paths,
        {
            "providers": [{"id": "scripted", "model": "echo"}],
            "files": {"maxFileBytes": 1024, "maxMessageBytes": 1500},
        },
    )
    async with running_engine(paths) as (_, api, _):
        too_big = await upload(api, "big.bin", b"x" * 2000)
        assert too_big.status_code == 413 and "files.maxFileBytes" in too_big.text
        one = (await upload(api, "a.txt", b"a" * 1000)).json()["file"]["id"]
        two = (await upload(api, "b.txt", b"b" * 1000)).json()["file"]["id"]
        body = {"userId": "ann", "channelId": "c", "text": "both",
                "files": [{"id": one}, {"id": two}]}  # fmt: skip
        refused = await api.post("/v1/engine/messages", json=body)
        assert refused.status_code == 413 and "files.maxMessageBytes" in refused.text
        unknown = {"userId": "ann", "channelId": "c", "files": [{"id": "f" * 64}]}
        assert (await api.post("/v1/engine/messages", json=unknown)).status_code == 404
        empty = {"userId": "ann", "channelId": "c", "text": ""}
        assert (await api.post("/v1/engine/messages", json=empty)).status_code == 422


async def test_an_image_reaches_the_agent_as_a_file_and_the_model_as_an_image_part(
    paths: HomePaths,
) -> None:
    vendor = FakeOpenAI()
    with LoopbackServer(vendor):
        provider = {"id": "o", "type": "openai", "model": "gpt-fake",
                    "options": {"baseUrl": vendor.api_base, "maxRetries": 0}}  # fmt: skip
        write_settings(paths, {"providers": [provider]})
        vendor.reply_text("A map of Zürich.")
        async with running_engine(paths) as (engine, api, _):
            picture = (await upload(api, "map.png", PNG)).json()["file"]
            body = {"userId": "ann", "channelId": "c", "text": "what is this?",
                    "files": [{"id": picture["id"], "name": "zurich.png"}]}  # fmt: skip
            posted = await api.post("/v1/engine/messages", json=body)
            assert posted.status_code == 202, posted.text
            agent_id = posted.json()["agentId"]
            async with asyncio.timeout(10):
                while not vendor.requests:
                    await asyncio.sleep(0.01)
            sent = vendor.requests[0].body["messages"][-1]
            text, image = sent["content"]
            assert image["type"] == "image_url"
            assert image["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
            assert text["text"].startswith("what is this?\n\n[Attached file: zurich.png (image/png")
            records = await history_of(engine, agent_id)
            (user,) = [r for r in records if r["type"] == "user_message"]
            (file,) = user["files"]
            assert (file["id"], file["sha256"], file["name"]) == (
                picture["id"], picture["id"], "zurich.png"
            )  # fmt: skip
            placed = Path(file["path"])
            assert await asyncio.to_thread(placed.read_bytes) == PNG  # the agent may read it
            # Its own copy, in the folder only this agent may read, never a link to
            # the stored bytes.
            assert placed.parent == paths.received.resolve() / agent_id
            assert (await asyncio.to_thread(placed.stat)).st_nlink == 1
            descriptor = UserDescriptor(connector="local", userId="ann", channelId="c")
            assert engine.agents.agent_id_for(descriptor) == agent_id


def test_the_local_model_gets_the_text_note(tmp_path: Path) -> None:
    """The local model takes no images: the note in the text is what it gets."""
    photo = tmp_path / "map.png"
    photo.write_bytes(PNG)
    reference = {"id": "a" * 64, "name": "map.png", "mimeType": "image/png",
                 "size": len(PNG), "path": str(photo)}  # fmt: skip
    message = user_message("what is this?", None, [reference])
    assert message.files == (Attachment("map.png", "image/png", len(PNG), str(photo)),)
    (chat,) = to_chat(InferenceRequest([message]))
    assert chat == {
        "role": "user",
        "content": f"what is this?\n\n[Attached file: map.png (image/png, {len(PNG)} bytes) "
        f"at {photo}]",
    }
