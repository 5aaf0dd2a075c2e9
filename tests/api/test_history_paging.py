"""Paging an agent's history by record number: ``before``, ``after``, or both."""

from __future__ import annotations

import httpx
import pytest

from claybot.engine.engine import Engine


@pytest.fixture
async def agent_id(engine: Engine, api: httpx.AsyncClient) -> str:
    """An agent with 7 records: start, then a message and its echo three times."""
    agent = ""
    for text in ("one", "two", "three"):
        response = await api.post(
            "/v1/engine/messages", json={"userId": "u", "channelId": "c", "text": text}
        )
        assert response.status_code == 202, response.text
        posted = response.json()
        agent = posted["agentId"]
        await engine.agents.turn(agent, posted["messageId"]).outcome(10)
    return agent


async def seqs(api: httpx.AsyncClient, agent_id: str, **params: int) -> list[int]:
    response = await api.get(f"/v1/engine/agents/{agent_id}/history", params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == 7
    return [record["seq"] for record in body["records"]]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [0, 1, 2, 3, 4, 5, 6]),
        ({"before": 3}, [0, 1, 2]),
        ({"after": 4}, [5, 6]),
        ({"limit": 2}, [5, 6]),
        # Both: the records strictly between them, oldest first, at most `limit`.
        ({"after": 1, "before": 5}, [2, 3, 4]),
        ({"after": 1, "before": 5, "limit": 2}, [2, 3]),
        ({"after": -1, "before": 2}, [0, 1]),
        ({"after": -1, "before": 0}, []),
        ({"after": 3, "before": 4}, []),
        ({"after": 5, "before": 2}, []),
        ({"after": 2, "before": 100}, [3, 4, 5, 6]),
    ],
)
async def test_history_pages(
    api: httpx.AsyncClient, agent_id: str, params: dict[str, int], expected: list[int]
) -> None:
    assert await seqs(api, agent_id, **params) == expected
