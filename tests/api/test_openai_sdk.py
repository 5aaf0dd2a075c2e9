"""The official OpenAI SDK, unmodified, against a real engine process over TCP.

The SDK gets the engine's address as ``base_url`` and a ClayBot API key with the
``chat`` scope as its ``api_key``, and holds a three-turn conversation with the
key's agent the way every OpenAI client does: resending the whole history each
time, streaming or not. It sees the agent's tool use (in the ``claybot`` extension,
``model_extra``), and the engine's history shows that the resent history added
nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

RULES: list[dict[str, Any]] = [
    {
        "match": "Who else",
        "response": {
            "text": "Let me look.",
            "toolCalls": [{"id": "call-list", "name": "list_agents", "arguments": {}}],
        },
    },
    {"match": "openai:", "response": "Only you and me."},  # the list_agents result
    {"match": "Remember", "response": "I will remember 42."},
]
# The model streams its text four characters at a time, 50 ms apart: a reply arrives
# in pieces, as from a real model.
STREAMING = {"rules": RULES, "streamChunkChars": 4, "streamDelayS": 0.05}
SETTINGS: dict[str, Any] = {
    "providers": [{"id": "scripted", "model": "rules", "options": STREAMING}],
    "heartbeat": {"enabled": False},
}


@pytest.fixture
def engine(paths: HomePaths) -> Iterator[EngineProcess]:
    write_settings(paths, SETTINGS)
    process = EngineProcess(paths)
    process.start()
    yield process
    process.terminate()


def create_key(engine: EngineProcess, *scopes: str) -> str:
    with engine.client() as client:
        response = client.post("/v1/engine/keys", json={"name": "sdk", "scopes": list(scopes)})
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


def sdk(engine: EngineProcess, key: str) -> openai.OpenAI:
    with engine.client() as client:
        port = client.get("/v1/engine/status").json()["tcp"]["port"]
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key)


def extension(answer: Any) -> dict[str, Any]:
    extra = answer.model_extra or {}
    claybot: dict[str, Any] = extra["claybot"]
    return claybot


def history(engine: EngineProcess, agent_id: str) -> list[dict[str, Any]]:
    with engine.client() as client:
        response = client.get(f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000})
    assert response.status_code == 200, response.text
    records: list[dict[str, Any]] = response.json()["records"]
    return records


def test_a_three_turn_conversation_through_the_sdk_streamed_and_not(
    engine: EngineProcess,
) -> None:
    client = sdk(engine, create_key(engine, "chat"))
    messages: list[Any] = [{"role": "system", "content": "You are terse."}]

    # Turn 1, not streamed: the agent looks something up with a tool.
    messages.append({"role": "user", "content": "Who else is here?"})
    first = client.chat.completions.create(model="claybot", messages=messages)
    reply = first.choices[0].message
    assert (reply.role, reply.content) == ("assistant", "Let me look.\n\nOnly you and me.")
    assert reply.tool_calls is None  # the agent's tools are not the client's to run
    assert first.choices[0].finish_reason == "stop" and first.object == "chat.completion"
    used = extension(first)
    agent_id = used["agentId"]
    [call] = used["toolCalls"]
    assert call["name"] == "list_agents" and call["result"]["isError"] is False
    assert f"openai:{agent_owner(engine, agent_id)}/default" in call["result"]["text"]
    assert first.usage is not None and first.usage.total_tokens == 4
    messages.append({"role": "assistant", "content": reply.content})

    # Turn 2, streamed, the whole history resent: the reply comes as the model writes it.
    messages.append({"role": "user", "content": "Remember the number 42."})
    chunks = list(
        client.chat.completions.create(
            model="claybot",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == "I will remember 42."
    assert len(pieces) > 1, pieces  # deltas, not the reply whole at the end
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 2
    [ending] = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert ending.choices[0].finish_reason == "stop"
    assert extension(ending)["agentId"] == agent_id and extension(ending)["toolCalls"] == []
    text = "".join(pieces)
    messages.append({"role": "assistant", "content": text})

    # Turn 3, streamed, with a tool: the stream shows the call and its result as they
    # happen, between the text written before the call and the answer after it.
    messages.append({"role": "user", "content": "Who else is here now?"})
    chunks = list(client.chat.completions.create(model="claybot", messages=messages, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look.\n\nOnly you and me."
    assert all(c.choices[0].delta.tool_calls is None for c in chunks if c.choices)
    live = [extension(c) if (c.model_extra or {}).get("claybot") else {} for c in chunks]
    [called] = [n for n, extra in enumerate(live) if "toolCall" in extra]
    [answered] = [n for n, extra in enumerate(live) if "toolResult" in extra]
    said = [n for n, c in enumerate(chunks) if c.choices and c.choices[0].delta.content]
    first_answer = next(n for n in said if "Only" in (chunks[n].choices[0].delta.content or ""))
    assert said[0] < called < answered < first_answer
    assert live[called]["toolCall"]["name"] == "list_agents"
    assert live[answered]["toolResult"]["isError"] is False
    [ending] = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    [call] = extension(ending)["toolCalls"]
    assert call["name"] == "list_agents" and "openai:" in call["result"]["text"]
    assert call["id"] == live[called]["toolCall"]["id"]

    # The engine holds each message once, and each turn's replies once.
    records = history(engine, agent_id)
    said = [r["text"] for r in records if r["type"] == "user_message"]
    assert said == ["Who else is here?", "Remember the number 42.", "Who else is here now?"]
    replies = [r["text"] for r in records if r["type"] == "assistant_message" and r["text"]]
    assert replies == [
        "Let me look.", "Only you and me.", "I will remember 42.", "Let me look.",
        "Only you and me.",
    ]  # fmt: skip
    assert [r["type"] for r in records].count("tool_result") == 2

    # The SDK lists the key's agent as a model, and can talk to it by that name.
    models = [model.id for model in client.models.list()]
    assert models == ["claybot", f"agent:{agent_id}"]
    messages.append({"role": "assistant", "content": text})
    messages.append({"role": "user", "content": "Remember it again."})
    named = client.chat.completions.create(model=f"agent:{agent_id}", messages=messages)
    assert named.choices[0].message.content == "I will remember 42."
    assert extension(named)["agentId"] == agent_id


def agent_owner(engine: EngineProcess, agent_id: str) -> str:
    with engine.client() as client:
        agents = client.get("/v1/engine/agents").json()["agents"]
    [agent] = [a for a in agents if a["agentId"] == agent_id]
    owner: str = agent["descriptor"]["userId"]
    return owner


def test_the_sdk_gets_openai_errors_it_understands(engine: EngineProcess) -> None:
    chatter = sdk(engine, create_key(engine, "chat"))
    hello = [{"role": "user", "content": "Remember this"}]

    with pytest.raises(openai.NotFoundError) as missing:
        chatter.chat.completions.create(model="gpt-4o", messages=hello)  # type: ignore[arg-type]
    assert (missing.value.code, missing.value.param) == ("model_not_found", "model")
    assert missing.value.type == "invalid_request_error"

    with pytest.raises(openai.BadRequestError) as nothing_new:
        chatter.chat.completions.create(
            model="claybot",
            messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        )
    assert nothing_new.value.code == "no_user_message"

    with pytest.raises(openai.BadRequestError) as empty:
        chatter.chat.completions.create(model="claybot", messages=[])
    assert (empty.value.code, empty.value.param) == ("invalid_request", "messages")

    with pytest.raises(openai.AuthenticationError) as unknown:
        sdk(engine, "cb_not-a-key").models.list()
    assert unknown.value.status_code == 401 and unknown.value.code == "unauthorized"

    with pytest.raises(openai.PermissionDeniedError) as forbidden:
        sdk(engine, create_key(engine, "agents:read", "jobs:write")).chat.completions.create(
            model="claybot",
            messages=hello,  # type: ignore[arg-type]
        )
    assert forbidden.value.code == "forbidden" and "'chat'" in forbidden.value.message

    admin = sdk(engine, create_key(engine, "admin"))
    assert [model.id for model in admin.models.list()] == ["claybot"]  # no agent yet
    answer = chatter.chat.completions.create(model="claybot", messages=hello)  # type: ignore[arg-type]
    agent = extension(answer)["agentId"]
    assert [model.id for model in admin.models.list()] == ["claybot", f"agent:{agent}"]


def test_the_socket_is_trusted_and_needs_no_key(engine: EngineProcess) -> None:
    with engine.client() as client:
        response = client.post(
            "/v1/chat/completions",
            json={"model": "claybot", "messages": [{"role": "user", "content": "Remember"}]},
        )
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "I will remember 42."
        descriptor = agent_descriptor(client, response.json()["claybot"]["agentId"])
    assert descriptor == {
        "type": "user", "connector": "openai", "userId": "socket", "channelId": "default",
    }  # fmt: skip


def agent_descriptor(client: httpx.Client, agent_id: str) -> dict[str, Any]:
    agents = client.get("/v1/engine/agents").json()["agents"]
    [agent] = [a for a in agents if a["agentId"] == agent_id]
    descriptor: dict[str, Any] = agent["descriptor"]
    return descriptor
