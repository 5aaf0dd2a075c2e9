"""``GET /metrics``: the engine's metrics in Prometheus' text format (``engine/metrics.py``).

On the socket it is the owner's like every route; on TCP it needs a key with the
``metrics`` scope (or ``admin``), so a Prometheus server can scrape with a key that
can do nothing else.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from claybot.api.deps import MetricsDep
from claybot.engine.metrics import CONTENT_TYPE

METRICS_PATH = "/metrics"

router = APIRouter(tags=["metrics"])


@router.get(
    METRICS_PATH,
    summary="The engine's metrics, in Prometheus' text format (text/plain; version=0.0.4)",
    response_class=PlainTextResponse,
)
async def metrics(engine_metrics: MetricsDep) -> Response:
    # Here, not with the module: it brings prometheus_client, which boot does without.
    from claybot.engine.metrics_text import exposition

    body = await exposition(engine_metrics)
    return Response(body, media_type=CONTENT_TYPE)
