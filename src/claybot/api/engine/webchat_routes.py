"""The webchat connector's two doors: post a message, follow the conversation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request

from claybot.agents.descriptors import UserDescriptor
from claybot.api.engine.routes import SSE_PING_S, engine_of, resume_after
from claybot.api.responses import BODY_ERRORS, errors
from claybot.api.sse import EventStream
from claybot.api.uploads import attached
from claybot.connectors.base import InboundMessage
from claybot.connectors.webchat import LIVE_EVENTS, WEBCHAT_CONNECTOR, conversation_event
from claybot.engine.engine import Engine
from claybot.kernel.events import frame_event
from claybot.wire.agents import MessageAccepted
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import NAME_PATTERN, WebchatMessage

router = APIRouter(prefix="/v1/engine/webchat", route_class=AnswerRoute)
WEBCHAT_MARK = f'"{WEBCHAT_CONNECTOR}"'.encode()
LIVE_MARKS = tuple(f'"{kind}"'.encode() for kind in LIVE_EVENTS)


@router.post(
    "/messages",
    status_code=202,
    summary="Post a webchat message (durable on return)",
    responses=errors(*BODY_ERRORS, 404, 503),
)
async def post_message(request: Request, body: WebchatMessage) -> MessageAccepted:
    engine = engine_of(request)
    message = InboundMessage(
        WEBCHAT_CONNECTOR,
        body.userId,
        body.channelId,
        body.text,
        body.messageId,
        files=await attached(engine.files, body.files),
    )
    posted = await engine.post_inbound(message)  # too large, stopping: the shared handlers
    return MessageAccepted(
        ok=True, agentId=posted.agent_id, messageId=posted.message_id, duplicate=posted.duplicate
    )


@router.get(
    "/events",
    summary="SSE: this conversation's replies (as they stream), tool calls, permission prompts",
    response_class=EventStream,
    status_code=200,
    responses=errors(400, 422),
)
async def events(
    request: Request,
    user_id: Annotated[str, Query(alias="userId", pattern=NAME_PATTERN, max_length=256)],
    channel_id: Annotated[
        str, Query(alias="channelId", pattern=NAME_PATTERN, max_length=256)
    ] = "web",
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStream:
    return conversation_stream(engine_of(request), user_id, channel_id, resume_after(last_event_id))


def conversation_stream(
    engine: Engine, user_id: str, channel_id: str, after: int | None
) -> EventStream:
    """One webchat conversation's events after event ``after`` (all still buffered when
    None), opened by an init frame that lists its pending permission prompts. The
    dashboard's Chat page follows the same stream."""
    subscription = engine.events.subscribe(after)
    pending = [
        item.to_dict()
        for item in engine.permissions.list("pending")
        if item.connector == WEBCHAT_CONNECTOR
        and item.user_id == user_id
        and item.channel_id == channel_id
    ]
    init = {"id": engine.events.last_id, "type": "init", "payload": {"pendingPermissions": pending}}

    descriptor = UserDescriptor(connector=WEBCHAT_CONNECTOR, userId=user_id, channelId=channel_id)
    agent_id = engine.agents.agent_id_for(descriptor)  # None until the first message

    def in_conversation(frame: bytes) -> bool:
        # Only a frame that names the webchat connector, or a live event (which names
        # the agent only), can belong here: the rest of the bus is skipped undecoded.
        nonlocal agent_id
        if WEBCHAT_MARK in frame:
            return conversation_event(frame_event(frame).to_dict(), user_id, channel_id)
        if not any(mark in frame for mark in LIVE_MARKS):
            return False
        agent_id = agent_id or engine.agents.agent_id_for(descriptor)
        if agent_id is None or agent_id.encode() not in frame:
            return False
        return conversation_event(frame_event(frame).to_dict(), user_id, channel_id, agent_id)

    return EventStream(init, subscription, in_conversation, ping_s=SSE_PING_S)
