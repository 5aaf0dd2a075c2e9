"""Paging an agent's history by record number: ``before``, ``after``, or both."""

from __future__ import annotations

import httpx
import pytest

from claybot.agents.history import damaged_placeholder, note_record
from claybot.agents.records import encode_record_line
from claybot.durable.jsonl import parse_jsonl
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


async def test_without_paging_every_record_comes_in_order(
    engine: Engine, api: httpx.AsyncClient, agent_id: str
) -> None:
    """Seed 000's route has no paging: a client written against it gets the whole
    history, here 3,509 records (read and sent 1,000 at a time), not the last 100."""
    assert await engine.agents.unload_idle(older_than_s=0) == 1
    history = engine.paths.agents / agent_id / "history.jsonl"
    with history.open("ab") as file:
        for n in range(3500):
            file.write(encode_record_line(note_record(n, f"note {n}")))
        file.write(b"not json\n")  # a damaged line is a record too, in its place
        file.write(encode_record_line(note_record(3500, "the last")))
    response = await api.get(f"/v1/engine/agents/{agent_id}/history")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    on_disk, _, _ = parse_jsonl(history.read_bytes(), damaged_placeholder)
    assert body == {
        "ok": True,
        "agentId": agent_id,
        "total": 3509,
        "records": [{"seq": seq, **record} for seq, record in enumerate(on_disk)],
    }
    assert body["records"][-2]["type"] == "damaged"


async def test_the_whole_history_of_an_unknown_agent_is_a_404(api: httpx.AsyncClient) -> None:
    response = await api.get("/v1/engine/agents/nobody/history")
    assert response.status_code == 404, response.text
