"""The webchat stream carries its conversation's reply as it is written, and nobody
else's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

STREAMING_ECHO = {
    "providers": [{"id": "scripted", "model": "echo", "options": {"streamChunkChars": 4}}]
}


def frames(stream: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in stream.iter_lines():
        if line.startswith("data:"):
            yield json.loads(line[5:])


def test_a_webchat_reply_streams_to_its_conversation_only(paths: HomePaths) -> None:
    write_settings(paths, STREAMING_ECHO)
    engine = EngineProcess(paths)
    engine.start()
    try:
        with (
            engine.client() as client,
            client.stream("GET", "/v1/engine/webchat/events", params={"userId": "bob"}) as stream,
        ):
            received = frames(stream)
            assert next(received)["type"] == "init"
            agents = {}
            for user in ("ann", "bob"):
                posted = client.post(
                    "/v1/engine/webchat/messages",
                    json={"userId": user, "text": f"hi from {user}", "messageId": f"w-{user}"},
                )
                assert posted.status_code == 202
                agents[user] = posted.json()["agentId"]
            streamed = []
            while (frame := next(received))["type"] == "agent.delta":
                streamed.append(frame["payload"])
        assert frame["type"] == "agent.outgoing"
        assert frame["payload"]["message"]["text"] == "echo: hi from bob"
        # Bob's text in pieces, before the final message; none of ann's.
        assert len(streamed) > 1
        assert "".join(piece["text"] for piece in streamed) == "echo: hi from bob"
        assert {(p["agentId"], p["messageId"]) for p in streamed} == {(agents["bob"], "w-bob")}
    finally:
        engine.terminate()
