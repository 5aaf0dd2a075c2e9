"""The ``webchat`` connector: the dashboard's chat, over HTTP.

Messages come in through ``POST /v1/engine/webchat/messages``; replies and
permission prompts go out on the SSE stream ``GET /v1/engine/webchat/events``,
filtered to one conversation. There is no sender object: like the local
connector, it is a view of the engine's events, so a browser that reconnects
with ``Last-Event-ID`` misses nothing still buffered.
"""

from __future__ import annotations

from typing import Any

WEBCHAT_CONNECTOR = "webchat"
PERMISSION_EVENTS = frozenset({"permission.requested", "permission.granted", "permission.denied"})


def conversation_event(event: dict[str, Any], user_id: str, channel_id: str) -> bool:
    """Whether an engine event belongs on this webchat conversation's stream."""
    kind = event.get("type")
    payload = event.get("payload") or {}
    if kind == "agent.outgoing":
        target = payload.get("message") or {}
    elif kind in PERMISSION_EVENTS:
        target = payload
    else:
        return False
    return (
        target.get("connector") == WEBCHAT_CONNECTOR
        and target.get("userId") == user_id
        and target.get("channelId") == channel_id
    )
