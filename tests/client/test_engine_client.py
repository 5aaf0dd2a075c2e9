"""The socket client's reading of the engine's event stream (through httpx-sse)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from claybot.client.engine_client import EngineApiError, EngineClient
from claybot.kernel.sse import sse_comment, sse_frame

STREAM = b"".join(
    [
        sse_frame(b'{"id": 5, "type": "init", "payload": {}, "timestamp": null}', event="message"),
        sse_frame(
            b'{"id": 6, "type": "a", "payload": {"n": 1}, "timestamp": "T6"}', event="message", id=6
        ),
        sse_comment("ping"),  # after an id: a frame with no data, which is no event
        # data on two lines
        sse_frame(
            b'{"id": 7,\n"type": "b", "payload": {}, "timestamp": "T7"}', event="message", id=7
        ),
    ]
)


def client_answering(response: httpx.Response, seen: list[httpx.Request]) -> EngineClient:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return response

    return EngineClient(Path("/nowhere.sock"), transport=httpx.MockTransport(answer))


def test_each_event_of_the_stream_is_yielded_once_and_resumes_after_an_id() -> None:
    seen: list[httpx.Request] = []
    stream = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM)
    with client_answering(stream, seen) as client:
        events = list(client.events(4))
    assert [(event.id, event.type, event.is_init) for event in events] == [
        (5, "init", True),
        (6, "a", False),
        (7, "b", False),
    ]
    assert events[1].payload == {"n": 1} and events[0].timestamp is None
    assert seen[0].headers["last-event-id"] == "4"
    assert seen[0].headers["accept"] == "text/event-stream"


def test_a_refused_stream_is_the_engines_error() -> None:
    refusal = httpx.Response(
        400,
        json={"error": {"code": "invalid_request", "message": "Last-Event-ID must be an integer",
                        "field": "Last-Event-ID"}},
    )  # fmt: skip
    with client_answering(refusal, []) as client, pytest.raises(EngineApiError) as refused:
        list(client.events())
    assert (refused.value.status, refused.value.code) == (400, "invalid_request")
    assert refused.value.field == "Last-Event-ID"
