"""The ``webchat`` connector: the dashboard's chat, over HTTP.

Messages come in through ``POST /v1/engine/webchat/messages``; replies, their
text as it streams, tool calls and permission prompts go out on the SSE stream
``GET /v1/engine/webchat/events``, filtered to one conversation. There is no
sender object: like the local connector, it is a view of the engine's events, so
a browser that reconnects with ``Last-Event-ID`` misses nothing still buffered.
"""

from __future__ import annotations

from claybot.kernel.events import EventJson

WEBCHAT_CONNECTOR = "webchat"
PERMISSION_EVENTS = frozenset({"permission.requested", "permission.granted", "permission.denied"})
# What the conversation's agent shows while a turn runs; these name the agent only.
LIVE_EVENTS = frozenset(
    {"agent.delta", "agent.tool_call", "agent.tool_result", "provider.fallback"}
)


def conversation_event(
    event: EventJson, user_id: str, channel_id: str, agent_id: str | None = None
) -> bool:
    """Whether an engine event belongs on this webchat conversation's stream
    (``agent_id``: the conversation's agent, once it has one)."""
    kind = event.get("type")
    payload = event.get("payload") or {}
    if kind in LIVE_EVENTS:
        return agent_id is not None and payload.get("agentId") == agent_id
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
