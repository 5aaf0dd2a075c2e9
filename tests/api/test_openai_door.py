"""The OpenAI-compatible door in-process: the engine's app behind the same API-key
middleware as its TCP listener, and bare as on its Unix socket.

The conversation rule, who may talk to which agent, the errors in OpenAI's shape,
the reply timeout and the retry that follows the turn instead of saying its message
again. The official SDK against a real engine process is in test_openai_sdk.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.config.home import HomePaths
from claybot.config.settings import ChatSettings
from claybot.engine.engine import Engine, EngineOptions
from claybot.server.app import create_app
from tests.conftest import write_settings

RULES: list[dict[str, Any]] = [
    {
        "match": "Who else",
        "response": {
            "text": "Let me look.",
            "toolCalls": [{"id": "call-list", "name": "list_agents", "arguments": {}}],
        },
    },
    {"match": "openai:", "response": "Only you and me."},  # the tool's result
    {"match": "slow", "response": "Done at last."},
    {"match": "", "response": "Noted."},
]
SETTINGS: dict[str, Any] = {
    "providers": [{"id": "scripted", "model": "rules", "options": {"rules": RULES}}],
    "heartbeat": {"enabled": False},
}


@dataclass
class Door:
    engine: Engine
    socket: httpx.AsyncClient  # the bare app, as on the Unix socket
    tcp: httpx.AsyncClient  # behind API keys, as on TCP

    async def key(self, *scopes: str) -> dict[str, str]:
        _, plaintext = await self.engine.keys.create("test", scopes, rate_limit_rpm=10_000)
        return {"Authorization": f"Bearer {plaintext}"}


@asynccontextmanager
async def open_door(paths: HomePaths, settings: dict[str, Any]) -> AsyncIterator[Door]:
    write_settings(paths, settings)
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    app = create_app(engine)
    try:
        async with (
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://socket", timeout=30
            ) as socket,
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=ApiKeyMiddleware(app, engine.keys)),
                base_url="http://tcp",
                timeout=30,
            ) as tcp,
        ):
            yield Door(engine, socket, tcp)
    finally:
        await engine.stop(drain_timeout_s=2)


@pytest.fixture
async def door(paths: HomePaths) -> AsyncIterator[Door]:
    async with open_door(paths, SETTINGS) as opened:
        yield opened


@pytest.fixture
async def slow_door(paths: HomePaths) -> AsyncIterator[Door]:
    """Every model call takes half a second."""
    provider = {**SETTINGS["providers"][0]}
    provider["options"] = {**provider["options"], "delayS": 0.5}
    async with open_door(paths, {**SETTINGS, "providers": [provider]}) as opened:
        yield opened


async def reply_timeout(engine: Engine, seconds: float) -> None:
    await engine.configuration.update_settings(
        engine.settings.model_copy(update={"chat": ChatSettings(reply_timeout_s=seconds)})
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def openai_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error, checked to be in OpenAI's shape with this status and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["message"]
    return error


async def chat(client: httpx.AsyncClient, messages: list[dict[str, Any]], **extra: Any) -> Any:
    headers = extra.pop("headers", None)
    body = {"model": "claybot", "messages": messages, **extra}
    response = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def user_texts(engine: Engine, agent_id: str) -> list[str]:
    page = await engine.agents.histories.page(agent_id, after=None, before=None, limit=1000)
    return [r["text"] for r in page.records if r["type"] == "user_message"]


def stream_events(text: str) -> list[Any]:
    """The ``data:`` payloads of an SSE body, ``[DONE]`` as the string."""
    events = []
    for frame in text.split("\n\n"):
        if frame.startswith("data: "):
            data = frame[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


async def test_a_resent_conversation_says_only_its_new_messages(door: Door) -> None:
    first = await chat(door.socket, [{"role": "system", "content": "Be terse."}, user("Hi")])
    assert first["object"] == "chat.completion" and first["model"] == "claybot"
    assert first["choices"][0]["message"] == {"role": "assistant", "content": "Noted."}
    assert first["choices"][0]["finish_reason"] == "stop"
    extension = first["claybot"]
    assert extension["newMessage"] is True and extension["toolCalls"] == []
    agent_id = extension["agentId"]

    # The client's copy of the past is edited: ClayBot keeps its own.
    second = await chat(
        door.socket,
        [user("Hi (edited)"), assistant("Noted."), user("One"), user("Two")],
    )
    assert second["claybot"]["agentId"] == agent_id
    assert await user_texts(door.engine, agent_id) == ["Hi", "One\n\nTwo"]
    descriptor = door.engine.agents.descriptor_of(agent_id).model_dump()
    assert descriptor == {
        "type": "user",
        "connector": "openai",
        "userId": "socket",
        "channelId": "default",
    }


async def test_tool_use_is_listed_in_the_extension_not_as_openai_tool_calls(door: Door) -> None:
    answer = await chat(door.socket, [user("Who else is here?")])
    message = answer["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Let me look.\n\nOnly you and me."}
    [call] = answer["claybot"]["toolCalls"]
    assert (call["name"], json.loads(call["arguments"])) == ("list_agents", {})
    assert call["id"].startswith("call-list")
    assert call["result"]["isError"] is False
    assert "openai:socket/default" in call["result"]["text"]
    # The scripted model counts one token in and one out per call; the turn made two.
    assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}


async def test_the_echo_providers_token_usage_is_the_answers(paths: HomePaths) -> None:
    write_settings(paths, {"providers": [{"id": "scripted", "model": "echo"}]})
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    try:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://s") as client:
            answer = await chat(client, [user("count me")])
    finally:
        await engine.stop(drain_timeout_s=2)
    assert answer["choices"][0]["message"]["content"] == "echo: count me"
    # The scripted echo model counts its input and output in characters.
    assert answer["usage"] == {"prompt_tokens": 8, "completion_tokens": 14, "total_tokens": 22}


async def test_a_stream_without_deltas_sends_each_reply_and_the_extension(door: Door) -> None:
    response = await door.socket.post(
        "/v1/chat/completions",
        json={
            "model": "claybot",
            "messages": [user("Who else is here?")],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = stream_events(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = "".join(
        chunk["choices"][0]["delta"].get("content", "") for chunk in chunks if chunk["choices"]
    )
    assert content == "Let me look.\n\nOnly you and me."
    [last] = [
        chunk for chunk in chunks if chunk["choices"] and chunk["choices"][0]["finish_reason"]
    ]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert [call["name"] for call in last["claybot"]["toolCalls"]] == ["list_agents"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 4


async def test_a_retry_follows_the_turn_instead_of_saying_it_again(door: Door) -> None:
    first = await chat(door.socket, [user("Hello")])
    agent_id = first["claybot"]["agentId"]
    conversation = [user("Hello"), assistant("Noted."), user("Take note")]
    second = await chat(door.socket, conversation)
    again = await chat(door.socket, conversation)  # a retry, or a chat UI's regenerate
    assert again["claybot"]["newMessage"] is False
    assert again["claybot"]["messageId"] == second["claybot"]["messageId"]
    assert again["choices"][0]["message"]["content"] == "Noted."
    # A new message after the repeated one is said; the repeated one is not.
    third = await chat(door.socket, [*conversation, user("And this")])
    assert third["claybot"]["newMessage"] is True
    assert await user_texts(door.engine, agent_id) == ["Hello", "Take note", "And this"]


async def test_a_reply_timeout_is_504_and_resending_gets_the_reply_later(
    slow_door: Door,
) -> None:
    door = slow_door
    first = await chat(door.socket, [user("Hello")])
    agent_id = first["claybot"]["agentId"]
    await reply_timeout(door.engine, 0.05)
    conversation = [user("Hello"), assistant("Noted."), user("slow, please")]
    late = await door.socket.post(
        "/v1/chat/completions", json={"model": "claybot", "messages": conversation}
    )
    error = openai_error(late, 504, "reply_timeout")
    assert error["type"] == "server_error"
    assert late.headers["x-should-retry"] == "false"  # the SDKs would post it again
    streamed = await door.socket.post(
        "/v1/chat/completions",
        json={"model": "claybot", "messages": conversation, "stream": True},
    )
    [opening, failure] = stream_events(streamed.text)
    assert opening["choices"][0]["delta"]["role"] == "assistant"
    assert failure["error"]["code"] == "reply_timeout"

    await reply_timeout(door.engine, 30)
    answer = await chat(door.socket, conversation)
    assert answer["choices"][0]["message"]["content"] == "Done at last."
    assert answer["claybot"]["newMessage"] is False
    assert await user_texts(door.engine, agent_id) == ["Hello", "slow, please"]


async def test_an_idempotency_key_makes_a_first_message_once(door: Door) -> None:
    headers = {"Idempotency-Key": "request-1"}
    first = await chat(door.socket, [user("Hi")], headers=headers)
    again = await chat(door.socket, [user("Hi")], headers=headers)
    assert again["claybot"]["messageId"] == first["claybot"]["messageId"]
    assert again["claybot"]["newMessage"] is False
    assert await user_texts(door.engine, first["claybot"]["agentId"]) == ["Hi"]


async def test_keys_and_users_each_have_their_own_agent(door: Door) -> None:
    alice, bob = await door.key("chat"), await door.key("chat")
    admin = await door.key("admin")
    a1 = (await chat(door.tcp, [user("Hi")], headers=alice))["claybot"]["agentId"]
    a2 = (await chat(door.tcp, [user("Hi")], user="work", headers=alice))["claybot"]["agentId"]
    b1 = (await chat(door.tcp, [user("Hi")], headers=bob))["claybot"]["agentId"]
    assert len({a1, a2, b1}) == 3

    async def models(headers: dict[str, str] | None) -> dict[str, Any]:
        response = await (door.tcp if headers else door.socket).get("/v1/models", headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["object"] == "list"
        return {model["id"]: model for model in body["data"]}

    listed = await models(alice)
    assert list(listed) == ["claybot", f"agent:{a1}", f"agent:{a2}"]
    assert listed[f"agent:{a2}"]["claybot"]["user"] == "work"
    assert listed["claybot"]["owned_by"] == "claybot" and "claybot" not in listed["claybot"]
    assert list(await models(bob)) == ["claybot", f"agent:{b1}"]
    assert set(await models(admin)) == {"claybot", f"agent:{a1}", f"agent:{a2}", f"agent:{b1}"}
    assert set(await models(None)) == set(await models(admin))

    # Naming an agent: one's own, yes; another key's is as unknown as a missing one.
    named = await chat(door.tcp, [user("Again")], model=f"agent:{a2}", headers=alice)
    assert named["claybot"]["agentId"] == a2 and named["model"] == f"agent:{a2}"
    foreign = await door.tcp.post(
        "/v1/chat/completions",
        json={"model": f"agent:{a1}", "messages": [user("Hi")]},
        headers=bob,
    )
    assert openai_error(foreign, 404, "model_not_found")["param"] == "model"
    by_admin = await chat(door.tcp, [user("Hi")], model=f"agent:{b1}", headers=admin)
    assert by_admin["claybot"]["agentId"] == b1
    one = await door.tcp.get(f"/v1/models/agent:{a1}", headers=alice)
    assert one.json()["id"] == f"agent:{a1}"
    openai_error(await door.tcp.get(f"/v1/models/agent:{a1}", headers=bob), 404, "model_not_found")
    assert (await door.tcp.get("/v1/models/claybot", headers=bob)).json()["id"] == "claybot"


async def test_only_door_agents_can_be_named(door: Door) -> None:
    posted = await door.socket.post(
        "/v1/engine/messages", json={"userId": "u", "channelId": "c", "text": "local"}
    )
    local_agent = posted.json()["agentId"]
    response = await door.socket.post(
        "/v1/chat/completions",
        json={"model": f"agent:{local_agent}", "messages": [user("Hi")]},
    )
    openai_error(response, 404, "model_not_found")
    assert f"agent:{local_agent}" not in str((await door.socket.get("/v1/models")).json())


async def test_the_chat_scope_opens_the_door_and_nothing_else(door: Door) -> None:
    chatter = await door.key("chat")
    reader = await door.key("agents:read", "jobs:read")
    missing = await door.tcp.post("/v1/chat/completions", json={})
    error = openai_error(missing, 401, "unauthorized")
    assert error["type"] == "authentication_error"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = await door.tcp.get("/v1/models", headers={"Authorization": "Bearer cb_wrong"})
    openai_error(wrong, 401, "unauthorized")
    forbidden = await door.tcp.post(
        "/v1/chat/completions", json={"model": "claybot", "messages": [user("Hi")]}, headers=reader
    )
    error = openai_error(forbidden, 403, "forbidden")
    assert error["type"] == "permission_error" and "'chat'" in error["message"]
    openai_error(await door.tcp.get("/v1/models", headers=reader), 403, "forbidden")
    # The chat scope opens no other route, and other routes keep the engine's shape.
    engine_route = await door.tcp.get("/v1/engine/status", headers=chatter)
    assert engine_route.status_code == 403 and engine_route.json()["ok"] is False
    assert (await door.tcp.get("/v1/models", headers=chatter)).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        (b"{not json", 400, "malformed_json", None),
        (b"[]", 400, "invalid_request", None),
        (json.dumps({"model": "claybot"}).encode(), 400, "invalid_request", "messages"),
        (
            json.dumps({"model": "claybot", "messages": []}).encode(),
            400,
            "invalid_request",
            "messages",
        ),
        (json.dumps({"messages": [user("Hi")]}).encode(), 400, "invalid_request", "model"),
        (
            json.dumps(
                {"model": "claybot", "messages": [{"role": "robot", "content": "x"}]}
            ).encode(),
            400,
            "invalid_request",
            "messages.0.role",
        ),
        (
            json.dumps({"model": "claybot", "messages": [user("Hi")], "stream": "yes"}).encode(),
            400,
            "invalid_request",
            "stream",
        ),
        (
            json.dumps({"model": "claybot", "messages": [user("Hi")], "n": 2}).encode(),
            400,
            "invalid_request",
            "n",
        ),
        (
            json.dumps({"model": "claybot", "messages": [user("Hi"), assistant("Hello")]}).encode(),
            400,
            "no_user_message",
            "messages",
        ),
        (
            json.dumps(
                {"model": "claybot", "messages": [{"role": "system", "content": "x"}]}
            ).encode(),
            400,
            "no_user_message",
            "messages",
        ),
        (
            json.dumps({"model": "claybot", "messages": [user("   ")]}).encode(),
            400,
            "no_user_message",
            "messages",
        ),
        (
            json.dumps(
                {
                    "model": "claybot",
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "What is this?"},
                                {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                            ],
                        }
                    ],
                }
            ).encode(),
            400,
            "unsupported_content",
            "messages.0.content.1",  # a web address: never fetched
        ),
        (
            json.dumps({"model": "gpt-4o", "messages": [user("Hi")]}).encode(),
            404,
            "model_not_found",
            "model",
        ),
        (
            json.dumps({"model": "agent:nobody", "messages": [user("Hi")]}).encode(),
            404,
            "model_not_found",
            "model",
        ),
    ],
)
async def test_bad_requests_get_openai_shaped_4xx(
    door: Door, body: bytes, status: int, code: str, param: str | None
) -> None:
    response = await door.socket.post(
        "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    error = openai_error(response, status, code)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert door.engine.agents.listings.conversations("openai") == []  # nothing was said


async def test_text_parts_and_client_tools_are_taken_as_openai_clients_send_them(
    door: Door,
) -> None:
    body = {
        "model": "claybot",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Part one"}]}],
        "tools": [{"type": "function", "function": {"name": "run_here", "parameters": {}}}],
        "temperature": 0.2,
        "max_tokens": 100,
        "user": "someone@example.com/with a slash",
    }
    answer = await chat(door.socket, body.pop("messages"), **body)
    agent_id = answer["claybot"]["agentId"]
    assert await user_texts(door.engine, agent_id) == ["Part one"]
    channel = door.engine.agents.descriptor_of(agent_id).model_dump()["channelId"]
    assert channel.startswith("user-")  # a name the directory cannot hold is hashed


async def test_too_large_bodies_and_messages_are_413_in_openai_shape(door: Door) -> None:
    limit = door.engine.settings.agents.max_message_bytes
    big = await door.socket.post(
        "/v1/chat/completions", json={"model": "claybot", "messages": [user("x" * (limit + 1))]}
    )
    openai_error(big, 413, "too_large")
    huge = await door.socket.post("/v1/chat/completions", content=b"x" * (16 * 1024 * 1024 + 1))
    openai_error(huge, 413, "too_large")
    # A conversation resent whole may outgrow the engine's 1 MiB for other bodies:
    # only its new message is said.
    history = [user("y" * 1000) if i % 2 == 0 else assistant("ok") for i in range(2000)]
    answer = await chat(door.socket, [*history, user("and now?")])
    assert await user_texts(door.engine, answer["claybot"]["agentId"]) == ["and now?"]


async def test_unknown_openai_paths_answer_in_openai_shape(door: Door) -> None:
    openai_error(await door.socket.post("/v1/embeddings", json={}), 404, "not_found")
    wrong_method = await door.socket.get("/v1/chat/completions")
    openai_error(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["allow"] == "POST"


async def test_the_turn_runs_on_after_a_streaming_client_leaves(slow_door: Door) -> None:
    door = slow_door
    request = door.socket.post(
        "/v1/chat/completions",
        json={"model": "claybot", "messages": [user("slow one")], "stream": True},
    )
    task = asyncio.ensure_future(request)
    agents = door.engine.agents
    async with asyncio.timeout(10):
        while not agents.listings.conversations("openai"):
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The stream's listener went with the request (the engine's own metrics listener
    # stays); the agent finishes the turn anyway.
    assert door.engine.events._listeners == [door.engine.metrics._on_event]
    [entry] = agents.listings.conversations("openai")
    async with asyncio.timeout(10):
        while True:
            page = await agents.histories.page(entry.agent_id, after=None, before=None, limit=100)
            if any(r["type"] == "assistant_message" for r in page.records):
                break
            await asyncio.sleep(0.02)


async def test_a_provider_falling_through_shows_in_the_stream(paths: HomePaths) -> None:
    broken = {"id": "broken", "type": "scripted", "model": "fail"}
    settings = {**SETTINGS, "providers": [broken, *SETTINGS["providers"]]}
    async with open_door(paths, settings) as door:
        response = await door.socket.post(
            "/v1/chat/completions",
            json={"model": "claybot", "messages": [user("Hello")], "stream": True},
        )
    chunks = stream_events(response.text)[:-1]
    [fallback] = [c["claybot"]["fallback"] for c in chunks if "fallback" in c.get("claybot", {})]
    assert (fallback["from"], fallback["to"]) == ("broken", "scripted")
    assert "always fails" in fallback["reason"]
    # Nothing was streamed before it failed, so there is nothing to take back.
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert content == "Noted."
