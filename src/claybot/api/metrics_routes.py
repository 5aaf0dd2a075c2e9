"""``GET /metrics``: the engine's metrics in Prometheus' text format (``engine/metrics.py``).

On the socket it is the owner's like every route; on TCP it needs a key with the
``metrics`` scope (or ``admin``), so a Prometheus server can scrape with a key that
can do nothing else.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from claybot.api.routes import engine_of
from claybot.engine.metrics import CONTENT_TYPE

METRICS_PATH = "/metrics"

router = APIRouter(tags=["metrics"])


@router.get(
    METRICS_PATH,
    summary="The engine's metrics, in Prometheus' text format (text/plain; version=0.0.4)",
    response_class=PlainTextResponse,
)
async def metrics(request: Request) -> Response:
    # Here, not with the module: it brings prometheus_client, which boot does without.
    from claybot.engine.metrics_text import exposition

    body = await exposition(engine_of(request).metrics)
    return Response(body, media_type=CONTENT_TYPE)
