"""Seed 000's history answer, the whole of it, written as it is read.

``GET /v1/engine/agents/{id}/history`` with no paging parameter answers every record,
as the seed's clients expect, in the paged answer's shape (``{"ok", "agentId",
"total", "records"}``). A history of 100,000 records is 12 MB of JSON; built as one
list and one document it would cost the engine several times that for every such
read. Here the records go out a chunk at a time, each encoded once, so the engine
holds one chunk whatever the history's length. ``total`` is counted first, and the
answer holds exactly that many records (what is appended meanwhile is in the next
read).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.responses import StreamingResponse


def whole_history_response(
    agent_id: str, total: int, chunks: AsyncIterator[list[dict[str, Any]]]
) -> StreamingResponse:
    return StreamingResponse(_encoded(agent_id, total, chunks), media_type="application/json")


async def _encoded(
    agent_id: str, total: int, chunks: AsyncIterator[list[dict[str, Any]]]
) -> AsyncIterator[bytes]:
    head = {"ok": True, "agentId": agent_id, "total": total}
    yield orjson.dumps(head)[:-1] + b',"records":['
    first = True
    async for records in chunks:
        if not records:
            continue
        body = b",".join(map(orjson.dumps, records))
        yield body if first else b"," + body
        first = False
    yield b"]}"
