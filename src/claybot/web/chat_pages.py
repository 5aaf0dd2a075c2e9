"""The dashboard's Chat page: the webchat connector's conversations in a browser.

A conversation is the webchat connector's (user, channel) pair, and its agent is the
one the connector would reach: messages go in through ``Engine.post_inbound`` (durable
when it returns), and the page follows the same event stream as
``/v1/engine/webchat/events`` (``conversation_stream``): replies as they are written,
tool calls, permission prompts. A person chatting here is the dashboard's user
``dashboard``; conversations other webchat users have are listed and can be read and
answered the same way.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, Header, Query, Request
from fastapi.responses import Response

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.system import AgentNotFound
from claybot.api.dashboard_paths import MESSAGE_MAX
from claybot.api.engine.routes import engine_of, resume_after
from claybot.api.engine.webchat_routes import conversation_stream
from claybot.api.sse import EventStream
from claybot.api.uploads import chosen_files, read_upload
from claybot.connectors.base import InboundMessage
from claybot.connectors.webchat import WEBCHAT_CONNECTOR
from claybot.engine.feeds import ConversationFeed
from claybot.files.reference import FileReference
from claybot.kernel.errors import ClayError
from claybot.web.rendering import done, page
from claybot.web.routes import guard, guard_form
from claybot.wire.bodies import NAME_PATTERN

router = APIRouter(include_in_schema=False)
DASHBOARD_USER = "dashboard"
RECORDS_SHOWN = 50
CONVERSATIONS_SHOWN = 200
NAME = re.compile(NAME_PATTERN)
FILES_MAX = 20  # a message's files, as on the API (``WithFiles``)
# The header that tells the page's script what a message's files became (JSON, ASCII).
FILES_HEADER = "X-Claybot-Files"


def _conversation_path(user_id: str, channel_id: str) -> str:
    return f"/chat/{user_id}/{channel_id}"


@router.get("/chat")
async def conversations(request: Request) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    system = engine_of(request).agents
    listed: list[dict[str, Any]] = []
    for entry in system.listings.conversations(WEBCHAT_CONNECTOR):
        descriptor = entry.descriptor
        assert isinstance(descriptor, UserDescriptor)
        listing = system.listings.agent(entry.agent_id)
        listed.append(
            {
                "userId": descriptor.userId,
                "channelId": descriptor.channelId,
                "agentId": entry.agent_id,
                "updatedAt": listing["updatedAt"],
                "lifecycle": listing["lifecycle"],
            }
        )
    listed.sort(key=lambda item: item["updatedAt"], reverse=True)
    return page(
        request,
        "chat.html",
        session=session,
        conversations=listed[:CONVERSATIONS_SHOWN],
        total=len(listed),
        suggested=f"chat-{secrets.token_hex(3)}",
    )


@router.get("/chat/new")
async def new_conversation(
    request: Request, channel: Annotated[str, Query(max_length=256)] = ""
) -> Response:
    """Where the New conversation form leads: the (empty) conversation of that name."""
    session = await guard(request)
    if isinstance(session, Response):
        return session
    channel = channel.strip()
    if not channel or not NAME.match(channel):
        return page(request, "problem.html", status_code=422, session=session, back="/chat",
                    message="A conversation's name may not be empty or hold '/'.")  # fmt: skip
    return done(request, _conversation_path(DASHBOARD_USER, channel))


@router.get("/chat/{user_id}/{channel_id}")
async def conversation(request: Request, user_id: str, channel_id: str) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    engine = engine_of(request)
    descriptor = UserDescriptor(connector=WEBCHAT_CONNECTOR, userId=user_id, channelId=channel_id)
    agent_id = engine.agents.agent_id_for(descriptor)
    records: list[dict[str, Any]] = []
    total = 0
    if agent_id is not None:
        try:
            history = await engine.agents.histories.page(
                agent_id, after=None, before=None, limit=RECORDS_SHOWN
            )
        except AgentNotFound:  # removed between the two calls
            agent_id = None
        else:
            records, total = history.records, history.total
    prompts = [
        item.to_dict()
        for item in engine.permissions.list("pending")
        if item.connector == WEBCHAT_CONNECTOR
        and item.user_id == user_id
        and item.channel_id == channel_id
    ]
    return page(
        request,
        "chat_conversation.html",
        session=session,
        user_id=user_id,
        channel_id=channel_id,
        path=_conversation_path(user_id, channel_id),
        agent_id=agent_id,
        records=records,
        total=total,
        prompts=prompts,
        # The stream starts after what the page shows: nothing is shown twice.
        after=engine.events.last_id,
    )


@router.get("/chat/{user_id}/{channel_id}/events")
async def conversation_events(
    request: Request,
    user_id: str,
    channel_id: str,
    after: Annotated[int | None, Query(ge=0)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    """The conversation's live events (SSE), for the page's script; a reconnect resumes
    after the last event it saw (``Last-Event-ID``, or ``after`` for a new stream)."""
    session = await guard(request)
    if isinstance(session, Response):
        return session
    try:
        resume = resume_after(last_event_id, after)
    except ClayError as exc:
        return Response(str(exc), status_code=400, media_type="text/plain")
    feed = engine_of(request).services.get(ConversationFeed)
    stream: EventStream = conversation_stream(feed, user_id, channel_id, resume)
    return stream


@router.post("/chat/{user_id}/{channel_id}")
async def send(
    request: Request,
    user_id: str,
    channel_id: str,
    text: Annotated[str, Form(max_length=MESSAGE_MAX)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """A message: its text, the files chosen with it (stored first), or both."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    back = _conversation_path(user_id, channel_id)
    # Read from the form (parsed already) rather than as a parameter: a file field left
    # empty still sends a part, which is no file.
    chosen = chosen_files(await request.form(), "file")
    if not text.strip() and not chosen:
        return page(request, "problem.html", status_code=422, session=session, back=back,
                    message="An empty message was not sent.")  # fmt: skip
    if len(chosen) > FILES_MAX:
        return page(request, "problem.html", status_code=422, session=session, back=back,
                    message=f"A message carries at most {FILES_MAX} files.")  # fmt: skip
    engine = engine_of(request)
    try:
        files = tuple([await read_upload(engine.files, upload) for upload in chosen])
        engine.files.check_message(stored.size for stored in files)
        await engine.post_inbound(
            InboundMessage(WEBCHAT_CONNECTOR, user_id, channel_id, text.strip() and text,
                           files=files)
        )  # fmt: skip
    except ClayError as exc:  # too large, over the quota, the engine stopping
        return page(request, "problem.html", status_code=exc.status, session=session,
                    back=back, message=str(exc))  # fmt: skip
    answer = done(request, back)
    if files and answer.status_code == 204:
        answer.headers[FILES_HEADER] = _files_header(files)
    return answer


def _files_header(files: tuple[FileReference, ...]) -> str:
    """What the page's script shows for a message it sent: each file's id, name and type
    (``ensure_ascii``: a header holds ASCII only)."""
    return json.dumps([stored.to_dict() for stored in files], ensure_ascii=True)


@router.post("/chat/{user_id}/{channel_id}/{verb}")
async def act(
    request: Request,
    user_id: str,
    channel_id: str,
    verb: str,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """Reset the conversation's context, or stop the turn it is running."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    back = _conversation_path(user_id, channel_id)
    if verb not in ("reset", "stop"):
        return page(request, "not_found.html", status_code=404, session=session, what=verb)
    system = engine_of(request).agents
    descriptor = UserDescriptor(connector=WEBCHAT_CONNECTOR, userId=user_id, channelId=channel_id)
    agent_id = system.agent_id_for(descriptor)
    if agent_id is not None:  # a conversation with no message yet has nothing to reset
        if verb == "reset":
            await system.reset(agent_id)
        else:
            system.abort(agent_id)
    return done(request, back)
