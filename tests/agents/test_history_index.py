"""History pages through the socket stay exactly the file's records across a SIGKILL in
the middle of appends, and across a deleted or stale index."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from claybot.agents.history import damaged_placeholder
from claybot.durable.jsonl import parse_jsonl
from tests.conftest import EngineProcess

pytestmark = pytest.mark.slow

USER = {"userId": "long", "channelId": "history"}


async def _post(engine: EngineProcess, prefix: str, count: int) -> None:
    async with engine.async_client() as client:
        for n in range(count):
            body = {**USER, "text": f"{prefix} {n}", "messageId": f"{prefix}-{n}"}
            response = await client.post("/v1/engine/messages", json=body)
            assert response.status_code == 202, response.text


async def _page(engine: EngineProcess, agent_id: str, **params: int) -> dict[str, Any]:
    async with engine.async_client() as client:
        response = await client.get(f"/v1/engine/agents/{agent_id}/history", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def _every_record(engine: EngineProcess, agent_id: str) -> tuple[list[dict[str, Any]], int]:
    """Paged forward 100 at a time, then checked against paging back from the end."""
    forward: list[dict[str, Any]] = []
    total = -1
    while True:
        page = await _page(engine, agent_id, after=len(forward) - 1, limit=100)
        total = page["total"]
        forward += page["records"]
        if not page["records"]:
            break
    backward: list[dict[str, Any]] = []
    while True:
        before = backward[0]["seq"] if backward else total
        page = await _page(engine, agent_id, before=before, limit=77)
        if not page["records"]:
            break
        backward = page["records"] + backward
    assert backward == forward
    return forward, total


def _on_disk(engine: EngineProcess, agent_id: str) -> list[dict[str, Any]]:
    data = (engine.paths.agents / agent_id / "history.jsonl").read_bytes()
    records, _, _ = parse_jsonl(data, damaged_placeholder)
    return [{"seq": seq, **record} for seq, record in enumerate(records)]


async def _agent_id(engine: EngineProcess) -> str:
    async with engine.async_client() as client:
        agents = (await client.get("/v1/engine/agents")).json()["agents"]
    (agent,) = agents
    return str(agent["agentId"])


async def _until_total(engine: EngineProcess, agent_id: str, total: int) -> None:
    async with asyncio.timeout(60):
        while (await _page(engine, agent_id, limit=1))["total"] < total:
            await asyncio.sleep(0.05)


async def test_pages_match_the_file_after_a_sigkill_during_appends(
    engine_process: EngineProcess,
) -> None:
    await asyncio.to_thread(engine_process.start)
    await _post(engine_process, "first", 300)
    agent_id = await _agent_id(engine_process)
    await _until_total(engine_process, agent_id, 601)  # start + a message and its reply each
    records, total = await _every_record(engine_process, agent_id)
    assert records == _on_disk(engine_process, agent_id) and total == 601
    index_file = engine_process.paths.agents / agent_id / "history.jsonl.idx"
    assert json.loads(index_file.read_bytes())["count"] >= 512  # saved with two checkpoints

    # Appends in flight (posts and turns), killed among them.
    posting = asyncio.create_task(_post(engine_process, "second", 10_000))
    await _until_total(engine_process, agent_id, 700)
    await asyncio.to_thread(engine_process.kill)
    with pytest.raises(httpx.TransportError):  # the engine is gone mid-post
        await posting
    await asyncio.to_thread(engine_process.start)
    records, total = await _every_record(engine_process, agent_id)
    assert total >= 700
    assert records == _on_disk(engine_process, agent_id)[:total]

    # The index deleted while the engine runs: the next page builds it again.
    index_file.unlink()
    records, total = await _every_record(engine_process, agent_id)
    assert records == _on_disk(engine_process, agent_id)[:total]
    assert index_file.exists()

    # A stale index (saved for a longer file than the one there now) is not believed.
    stale = json.loads(index_file.read_bytes())
    await asyncio.to_thread(engine_process.terminate)
    history = engine_process.paths.agents / agent_id / "history.jsonl"
    data = history.read_bytes()
    cut = data.index(b'"first-200"')
    history.write_bytes(data[: data.rindex(b"\n", 0, cut) + 1])  # the records before it
    index_file.write_bytes(json.dumps(stale).encode())
    await asyncio.to_thread(engine_process.start)
    records, total = await _every_record(engine_process, agent_id)
    assert records == _on_disk(engine_process, agent_id)
    assert total == len(records) < stale["count"]

    # Seed 000's route, no paging: every record, in order, as the file has them.
    async with engine_process.async_client() as client:
        response = await client.get(f"/v1/engine/agents/{agent_id}/history")
    assert response.status_code == 200, response.text
    whole = response.json()
    assert whole["records"] == _on_disk(engine_process, agent_id)
    assert whole["total"] == len(whole["records"]) > 300  # the 200 messages kept above
