"""The webchat connector's two doors: post a message, follow the conversation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from claybot.api.deps import AgentsDep, ConversationFeedDep, FilesDep
from claybot.api.engine.routes import SSE_PING_S, resume_after
from claybot.api.responses import BODY_ERRORS, errors
from claybot.api.sse import EventStream
from claybot.api.uploads import attached
from claybot.connectors.base import InboundMessage
from claybot.connectors.webchat import WEBCHAT_CONNECTOR
from claybot.engine.feeds import ConversationFeed
from claybot.wire.agents import MessageAccepted
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import NAME_PATTERN, WebchatMessage

router = APIRouter(prefix="/v1/engine/webchat", route_class=AnswerRoute)


@router.post(
    "/messages",
    status_code=202,
    summary="Post a webchat message (durable on return)",
    responses=errors(*BODY_ERRORS, 404, 503),
)
async def post_message(agents: AgentsDep, files: FilesDep, body: WebchatMessage) -> MessageAccepted:
    message = InboundMessage(
        WEBCHAT_CONNECTOR,
        body.userId,
        body.channelId,
        body.text,
        body.messageId,
        files=await attached(files, body.files),
    )
    turn = await agents.submit_inbound(message)  # too large, stopping: the shared handlers
    return MessageAccepted(
        ok=True, agentId=turn.agent_id, messageId=turn.id, duplicate=turn.duplicate
    )


@router.get(
    "/events",
    summary="SSE: this conversation's replies (as they stream), tool calls, permission prompts",
    response_class=EventStream,
    status_code=200,
    responses=errors(400, 422),
)
async def events(
    feed: ConversationFeedDep,
    user_id: Annotated[str, Query(alias="userId", pattern=NAME_PATTERN, max_length=256)],
    channel_id: Annotated[
        str, Query(alias="channelId", pattern=NAME_PATTERN, max_length=256)
    ] = "web",
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStream:
    return conversation_stream(feed, user_id, channel_id, resume_after(last_event_id))


def conversation_stream(
    feed: ConversationFeed, user_id: str, channel_id: str, after: int | None
) -> EventStream:
    """One webchat conversation's events after event ``after`` as a stream (see
    ``ConversationFeed.open``). The dashboard's Chat page follows the same stream."""
    opened = feed.open(user_id, channel_id, after)
    return EventStream(opened.init, opened.subscription, opened.keep, ping_s=SSE_PING_S)
