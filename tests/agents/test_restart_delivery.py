"""Across a stop and a start, a turn keeps its provider and its replies reach their clients.

A real engine process (``claybot start``) answers through a fake OpenAI server on
loopback that streams and can hold a reply back mid-stream:

- a turn cut short by the engine's death resumes at the next start on the provider
  settings name first, not on the next one because the first was closed under it;
- a reply the model finishes while the engine stops gracefully is written to history
  then, and arrives after the restart, once, at a client that resumes the event
  stream from the last event it saw, or at Telegram.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess, write_settings
from tests.plugins.telegram.fake_bot_api import FakeBotApi
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

WAIT_S = 30.0


@pytest.fixture
def vendor() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with LoopbackServer(fake):
        yield fake
        fake.release_stream()  # a stream still held must not keep the server from stopping


def settings(vendor: FakeOpenAI) -> dict[str, Any]:
    openai = {"id": "openai", "type": "openai", "model": "gpt-fake",
              "options": {"baseUrl": vendor.api_base, "maxRetries": 0}}  # fmt: skip
    # The fallback a closed provider fell through to: it answers "echo: ...".
    return {"providers": [openai, {"id": "scripted", "model": "echo"}]}


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def post(engine: EngineProcess, text: str) -> tuple[str, str]:
    with engine.client() as client:
        body = {"userId": "ann", "channelId": "c", "text": text}
        posted = client.post("/v1/engine/messages", json=body)
    assert posted.status_code == 202, posted.text
    return posted.json()["agentId"], posted.json()["messageId"]


def finals(engine: EngineProcess, agent_id: str, message_id: str) -> list[dict[str, Any]]:
    with engine.client() as client:
        page = client.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000})
    return [
        r
        for r in page.json()["records"]
        if r["type"] == "assistant_message" and r["messageId"] == message_id and r["final"]
    ]


def test_a_turn_resumed_at_start_calls_the_provider_settings_name_first(
    paths: HomePaths, vendor: FakeOpenAI
) -> None:
    write_settings(paths, settings(vendor))
    engine = EngineProcess(paths)
    engine.start()
    try:
        vendor.reply_text("an answer the engine never finishes reading")
        vendor.hold_stream_after(2)
        agent_id, message_id = post(engine, "hello")
        wait_for(lambda: vendor.frames_sent == 2, "the reply to stream")
        engine.kill()  # mid-reply
        # The resumed call streams a word, then waits while the engine finishes its start
        # (it built its providers a second time then, and closed the first ones).
        vendor.reply_text("the resumed answer")
        vendor.hold_stream_after(1)
        engine.start()
        vendor.release_stream()
        wait_for(lambda: finals(engine, agent_id, message_id), "the resumed turn's end")
        (final,) = finals(engine, agent_id, message_id)
    finally:
        engine.terminate()
    assert final["text"] == "the resumed answer"
    assert final["tokens"]["provider"] == "openai"
    assert len(vendor.requests) == 2


def events_after(engine: EngineProcess, last_id: int | None) -> Iterator[dict[str, Any]]:
    """The engine's events after ``last_id`` (all of the ring when it is older), as
    a client that reconnects with ``Last-Event-ID`` reads them."""
    headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
    with (
        engine.client() as client,
        client.stream("GET", "/v1/engine/events", headers=headers) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("data:"):
                yield json.loads(line[5:])


def replies_to(event: dict[str, Any], message_id: str) -> bool:
    return (
        event["type"] == "agent.outgoing"
        and event["payload"]["message"]["inReplyTo"] == message_id
        and event["payload"]["message"]["final"]
    )


def test_a_reply_finished_during_a_graceful_stop_arrives_after_the_restart_once(
    paths: HomePaths, vendor: FakeOpenAI
) -> None:
    write_settings(paths, settings(vendor))
    engine = EngineProcess(paths)
    engine.start()
    try:
        seen = events_after(engine, None)
        init = next(seen)
        assert init["type"] == "init"
        last_id = init["id"]
        vendor.reply_text("the answer written while the engine stops")
        vendor.hold_stream_after(2)
        agent_id, message_id = post(engine, "hello")
        wait_for(lambda: vendor.frames_sent == 2, "the reply to stream")
        for event in seen:  # what the client saw before the stop: not the reply
            assert not replies_to(event, message_id)
            last_id = event["id"]
            if event["type"] == "agent.delta":
                break
        seen.close()
        engine.process.send_signal(15)  # type: ignore[union-attr]
        # From "stopping…" on, nothing goes out; the model finishes its reply after it.
        wait_for(lambda: "stopping…" in engine.output(), "the engine to begin its stop")
        vendor.release_stream()
        assert engine.terminate() == 0
        # Written while the engine stopped: on disk before it is delivered.
        written = [json.loads(line) for line in (paths.agents / agent_id / "history.jsonl")
                   .read_text().splitlines()]  # fmt: skip
        assert [r["text"] for r in written if r.get("final")] == [
            "the answer written while the engine stops"
        ]

        engine.start()
        resumed = events_after(engine, last_id)
        assert next(resumed)["type"] == "init"
        delivered = []
        for event in resumed:
            if replies_to(event, message_id):
                delivered.append(event)
                break
        # Anything sent twice would come before the reply to a later message.
        vendor.reply_text("later")
        _, later_id = post(engine, "and later?")
        for event in resumed:
            if replies_to(event, message_id):
                delivered.append(event)
            if replies_to(event, later_id):
                break
        resumed.close()
        history = finals(engine, agent_id, message_id)
    finally:
        engine.terminate()
    assert [e["payload"]["message"]["text"] for e in delivered] == [
        "the answer written while the engine stops"
    ]
    assert [r["text"] for r in history] == ["the answer written while the engine stops"]
    assert len(vendor.requests) == 2  # the held reply was not asked for again


async def test_a_reply_finished_during_a_graceful_stop_reaches_telegram_after_it_once(
    paths: HomePaths, vendor: FakeOpenAI
) -> None:
    """The same through a connector that sends: Telegram gets the reply from the next
    start, once, and nothing while the engine stops."""
    engine = EngineProcess(paths)
    async with FakeBotApi().running() as bot_api:
        telegram = {"instanceId": "tg", "pluginId": "telegram",
                    "settings": {"allowedUserIds": [ANN], "baseUrl": bot_api.base_url,
                                 "pollTimeoutS": 1}}  # fmt: skip
        write_settings(paths, {**settings(vendor), "plugins": [telegram]})
        paths.auth.write_text(json.dumps({"tg": {"type": "token", "token": bot_api.token}}))
        await asyncio.to_thread(engine.start)
        try:
            vendor.reply_text("the answer written while the engine stops")
            vendor.hold_stream_after(2)
            bot_api.message(ANN, "hello")
            await until(lambda: vendor.frames_sent == 2, "the reply to stream")
            engine.process.send_signal(15)  # type: ignore[union-attr]
            await until(lambda: "stopping…" in engine.output(), "the engine to begin its stop")
            vendor.release_stream()
            assert await asyncio.to_thread(engine.terminate) == 0
            assert texts(bot_api) == []

            await asyncio.to_thread(engine.start)
            await until(lambda: texts(bot_api), "the reply after the restart")
            vendor.reply_text("later")
            bot_api.message(ANN, "and later?")
            await until(lambda: "later" in texts(bot_api), "the reply to a later message")
        finally:
            await asyncio.to_thread(engine.terminate)
    assert texts(bot_api) == ["the answer written while the engine stops", "later"]
    assert len(vendor.requests) == 2


ANN = 111


def texts(bot_api: FakeBotApi) -> list[str]:
    return [str(params["text"]) for params in bot_api.sent("sendMessage")]


async def until(condition: Any, what: str) -> None:
    try:
        async with asyncio.timeout(WAIT_S):
            while not condition():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
