"""The guards of tests/guards.py hold."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import httpx
import pytest

from tests.guards import SLOW_CALLBACK_S, NetworkBlocked, _SlowSteps


def test_only_loopback_can_be_reached() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(NetworkBlocked):
        sock.connect(("203.0.113.7", 443))  # TEST-NET-3: never a real host
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("api.openai.com", 443)
    with pytest.raises(httpx.ConnectError):
        httpx.get("https://api.anthropic.com/v1/messages", timeout=5)
    # Loopback stays open: a listener on 127.0.0.1 accepts.
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client.connect(server.getsockname())
    assert socket.getaddrinfo("localhost", 80)


async def test_the_loop_runs_in_debug_mode_with_a_100_ms_watch() -> None:
    loop = asyncio.get_running_loop()
    assert loop.get_debug() and loop.slow_callback_duration == SLOW_CALLBACK_S


@pytest.mark.blocks_loop_on_purpose
def test_a_blocking_step_is_caught() -> None:
    handler = _SlowSteps()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)

    async def blocks() -> None:
        time.sleep(SLOW_CALLBACK_S * 1.5)  # noqa: ASYNC251 - what the watch is for

    try:
        asyncio.run(blocks(), debug=True)
    finally:
        logger.removeHandler(handler)
    assert len(handler.seen) == 1 and "blocks()" in handler.seen[0]


def test_an_event_payload_that_is_not_its_type_is_refused() -> None:
    from pydantic import ValidationError

    from tests.guards import check_event_payload

    check_event_payload("agent.woke", {"agentId": "a1"})
    check_event_payload("proactive.update", {"anything": 1})  # free-form: not checked
    for wrong in ({"agentId": 5}, {"agentId": "a1", "extra": True}, {}):
        with pytest.raises(ValidationError):
            check_event_payload("agent.woke", wrong)


def test_every_engine_event_type_has_a_payload_type() -> None:
    from claybot.kernel.event_types import PAYLOAD_TYPES, EventType

    assert set(PAYLOAD_TYPES) == set(EventType)
