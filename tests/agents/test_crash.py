"""Kill the engine with SIGKILL at random moments while clients post; nothing is lost or doubled.

Twenty agents, one concurrent client each. A client sends its agent numbered
messages, each with a client message id, and retries the same id until the
engine acknowledges it (a kill can land before or after the acknowledgement).
Meanwhile the engine is SIGKILLed and restarted at random moments. At the end,
every acknowledged message must appear in its agent's history exactly once, in
order, with exactly one reply; and the live event stream must never have
carried two different replies for one message.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from typing import Any

import httpx
import pytest

from tests.conftest import EngineProcess

AGENTS = 20
KILLS = 10
MAX_MESSAGES_PER_AGENT = 60

pytestmark = pytest.mark.slow


async def _client(engine: EngineProcess, user: str, acked: list[int], stop: asyncio.Event) -> None:
    """Send numbered messages; a message once sent is retried (same id) until acknowledged."""
    seq = 0
    while seq < MAX_MESSAGES_PER_AGENT and not (stop.is_set() and seq > 0):
        body = {
            "userId": user,
            "channelId": "crash",
            "text": f"{user}:{seq}",
            "messageId": f"{user}-{seq}",
        }
        while True:
            try:
                async with engine.async_client(timeout_s=10) as client:
                    response = await client.post("/v1/engine/messages", json=body)
            except (httpx.TransportError, OSError):
                await asyncio.sleep(0.02)  # engine down: retry the same message id
                continue
            if response.status_code == 503:
                await asyncio.sleep(0.02)  # shutting down: the next engine takes it
                continue
            assert response.status_code == 202, response.text
            break
        acked.append(seq)
        seq += 1
        await asyncio.sleep(random.uniform(0, 0.02))


async def _follow_replies(
    engine: EngineProcess, replies: dict[str, set[str]], stop: asyncio.Event
) -> None:
    """Collect agent.outgoing events across restarts: message id -> outgoing ids seen."""
    while not stop.is_set():
        try:
            async with (
                engine.async_client(timeout_s=None) as client,
                client.stream("GET", "/v1/engine/events") as response,
            ):
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    event = json.loads(line[5:])
                    if event["type"] == "agent.outgoing":
                        message = event["payload"]["message"]
                        replies[message["inReplyTo"]].add(message["id"])
        except (httpx.TransportError, OSError):
            await asyncio.sleep(0.02)


async def _killer(engine: EngineProcess, stop: asyncio.Event, kills: list[float]) -> None:
    rng = random.Random()
    for _ in range(KILLS):
        await asyncio.sleep(rng.uniform(0.05, 0.6))
        engine.kill()
        kills.append(rng.random())
        await asyncio.to_thread(engine.start)
    stop.set()


async def _history(engine: EngineProcess, agent_id: str) -> list[dict[str, Any]]:
    async with engine.async_client() as client:
        response = await client.get(
            f"/v1/engine/agents/{agent_id}/history", params={"limit": 1000, "after": -1}
        )
        assert response.status_code == 200, response.text
        records: list[dict[str, Any]] = response.json()["records"]
        return records


async def test_sigkill_at_random_moments_loses_and_doubles_nothing(
    engine_process: EngineProcess,
) -> None:
    engine_process.start()
    users = [f"user{i:02d}" for i in range(AGENTS)]
    acked: dict[str, list[int]] = {user: [] for user in users}
    replies: dict[str, set[str]] = defaultdict(set)
    stop = asyncio.Event()
    kills: list[float] = []
    follower = asyncio.create_task(_follow_replies(engine_process, replies, stop))
    await asyncio.gather(
        _killer(engine_process, stop, kills),
        *(_client(engine_process, user, acked[user], stop) for user in users),
    )
    assert len(kills) >= KILLS

    # Let the last engine finish every acknowledged message.
    async with engine_process.async_client() as client:
        agents = (await client.get("/v1/engine/agents")).json()["agents"]
    agent_of = {a["descriptor"]["userId"]: a["agentId"] for a in agents}
    assert set(agent_of) == set(users)
    async with asyncio.timeout(60):
        while True:
            histories = {user: await _history(engine_process, agent_of[user]) for user in users}
            done = all(
                sum(1 for r in records if r["type"] == "assistant_message" and r.get("final"))
                >= len(acked[user])
                for user, records in histories.items()
            )
            if done:
                break
            await asyncio.sleep(0.1)
    stop.set()
    follower.cancel()
    assert engine_process.terminate() == 0

    total = 0
    for user in users:
        expected = [f"{user}-{seq}" for seq in acked[user]]
        assert expected == [f"{user}-{n}" for n in range(len(expected))]
        # Every history file still parses, line by line, straight from disk.
        path = engine_process.paths.agents / agent_of[user] / "history.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()]
        user_messages = [r["messageId"] for r in records if r["type"] == "user_message"]
        assert user_messages == expected, (
            f"{user}: processed {user_messages}, acknowledged {expected}"
        )
        finals = [r for r in records if r["type"] == "assistant_message" and r.get("final")]
        assert [r["messageId"] for r in finals] == expected
        for record in finals:
            assert record["text"] == f"echo: {user}:{record['messageId'].rsplit('-', 1)[1]}"
        total += len(expected)
    # One logical reply per message on the event stream: never two different reply ids.
    assert all(len(ids) == 1 for ids in replies.values()), {
        k: v for k, v in replies.items() if len(v) > 1
    }
    print(f"{total} acknowledged messages across {AGENTS} agents, {len(kills)} SIGKILLs")
    assert total >= AGENTS * 3
