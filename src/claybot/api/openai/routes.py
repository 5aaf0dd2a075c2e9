"""The OpenAI-compatible door: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Any OpenAI client (the SDKs with ``base_url``, editor plugins, chat UIs) talks to
ClayBot agents here, with their tools, memory and permissions. A model name picks
the agent (``conversation.py``), the request's new user messages go into it
as a connector's message would (connector ``openai``: no chat app gets the replies),
and the turn is answered as a ChatCompletion or streamed as chunks
(``turn.py``). On TCP these paths need the ``chat`` scope; errors are in
OpenAI's shape (``api/openai_errors.py``).

Who may talk to which agent: a key with ``chat`` has its own agents (model
``claybot``: one per key and ``user``; ``agent:<id>`` names one of them). The Unix
socket (the owner) and an ``admin`` key may also name any agent made through this
door.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.durable_port import IndexEntry
from claybot.api.engine.routes import engine_of
from claybot.api.openai.bodies import ChatCompletionRequest
from claybot.api.openai.conversation import (
    DEFAULT_MODEL,
    NOTHING_HELD,
    OPENAI_CONNECTOR,
    SOCKET_OWNER,
    TURN_SEPARATOR,
    ModelNotFound,
    agent_model,
    already_held,
    channel_of,
    idempotent_message_id,
    named_agent,
    read_conversation,
)
from claybot.api.openai.images import store_images
from claybot.api.openai.turn import HISTORY_LIMIT, ChatTurn, TurnWatch
from claybot.api.responses import openai_errors
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from claybot.kernel.ids import new_id
from claybot.wire.base import AnswerRoute
from claybot.wire.openai import AgentModel, ChatCompletion, ModelInfo, ModelList

router = APIRouter(
    prefix="/v1",
    tags=["OpenAI-compatible"],
    route_class=AnswerRoute,
    responses=openai_errors(400, 413, 500, 503, 507),
)
CHAT_PATH = "/v1/chat/completions"
# A client resends the whole conversation each time: a long one outgrows the 1 MiB
# the engine's other bodies are held to. What is said to the agent is still held to
# agents.maxMessageBytes.
CHAT_MAX_BODY_BYTES = 16 * 1024 * 1024

STREAM_DESCRIPTION = (
    "With `stream: true`: server-sent events, each `data: {chat.completion.chunk}`, "
    "ending with `data: [DONE]`. The first chunk gives the role; content chunks follow as "
    "the agent writes (each reply's final text completes what was streamed of it); chunks "
    "with an empty delta carry `claybot.toolCall`, `claybot.toolResult` or "
    "`claybot.fallback` as the turn goes; the chunk with `finish_reason` carries the "
    "whole `claybot` extension of a completion; with `stream_options.include_usage` a "
    "last chunk has `usage`. An error after the stream began (the reply timeout) comes "
    'as `data: {"error": {...}}`.'
)

# One server-sent event of the stream (OpenAPI before 3.2 describes an event stream by
# its events): its data is a chunk as JSON, an error, or ``[DONE]``.
CHUNK_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {
            "type": "string",
            "description": 'A `chat.completion.chunk` as JSON, `{"error": {...}}`, or `[DONE]`',
        }
    },
    "description": STREAM_DESCRIPTION,
}


class Caller:
    """Who is asking: an API key (TCP), or the owner on the Unix socket."""

    def __init__(self, request: Request) -> None:
        record = request.scope.get("state", {}).get("api_key")
        self.owner = SOCKET_OWNER if record is None else str(record.id)
        # The owner and admin keys may talk to every agent of this door.
        self.sees_all = record is None or "admin" in record.scopes

    def may_talk_to(self, descriptor: object) -> bool:
        return (
            isinstance(descriptor, UserDescriptor)
            and descriptor.connector == OPENAI_CONNECTOR
            and (self.sees_all or descriptor.userId == self.owner)
        )


def _agent_of(engine: Engine, caller: Caller, model: str) -> IndexEntry:
    """The agent ``agent:<id>`` names, if this caller may talk to it."""
    agent_id = named_agent(model)
    assert agent_id is not None
    if not engine.agents.exists(agent_id):
        raise ModelNotFound(model)
    entry = engine.agents.directory.entry(agent_id)
    if not caller.may_talk_to(entry.descriptor):
        raise ModelNotFound(model)  # another's agent is as unknown as a missing one
    return entry


@router.post(
    "/chat/completions",
    summary="Talk to an agent as to an OpenAI chat model",
    response_model=ChatCompletion,
    responses={
        200: {
            "description": "The agent's reply to the new messages; or, with `stream`, its chunks",
            "content": {"text/event-stream": {"schema": CHUNK_EVENT}},
        },
        **openai_errors(404, 504),
    },
    description=(
        "The conversation lives in ClayBot. Said to the agent are the `user` messages "
        "after the last `assistant` message (joined into one message); the agent holds "
        "the rest already, so editing earlier messages changes nothing there, and "
        "`system`, `developer` and `tool` messages are ignored. Images (`image_url` parts "
        "with a `data:` URL; web addresses are refused, never fetched) are stored and "
        "carried by the message as files. A request that repeats "
        "messages ClayBot holds (a retry, a regenerate) gets the reply of their turn "
        "instead of saying them again; so does one with an `Idempotency-Key` seen before. "
        "The model `claybot` is your agent (one per API key and `user`), "
        "`agent:<agentId>` one listed by GET /v1/models. The agent uses its own tools: "
        "they are listed in the `claybot` extension (`toolCalls`), never as OpenAI "
        "`tool_calls`; client `tools` are ignored. `usage` counts the tokens of the "
        "turn's model calls. " + STREAM_DESCRIPTION
    ),
)
async def chat_completions(
    request: Request,
    body: ChatCompletionRequest,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=256)] = None,
) -> Any:
    engine = engine_of(request)
    caller = Caller(request)
    said = read_conversation(body.messages)  # refuses a request with nothing new to say
    agent_id, descriptor = _conversation(engine, caller, body)
    held = NOTHING_HELD
    if agent_id is not None and said.last is not None:
        page = await engine.agents.histories.page(
            agent_id, after=None, before=None, limit=HISTORY_LIMIT
        )
        held = already_held(page.records, said)
    streaming = bool(body.stream)
    if agent_id is not None and held.message_id is not None and held.count == len(said.new):
        # Everything new is what the agent heard already: answer with that turn.
        turn = engine.agents.turn(agent_id, held.message_id)
        chat = ChatTurn(engine.agents, turn, model=body.model, new_message=False, watch=None)
    else:
        message = InboundMessage(
            OPENAI_CONNECTOR,
            descriptor.userId,
            descriptor.channelId,
            TURN_SEPARATOR.join(said.new[held.count :]),
            idempotent_message_id(caller.owner, idempotency_key) if idempotency_key else new_id(),
            files=await store_images(engine.files, said.images_from(held.count)),
        )
        chat = await _say(engine, message, model=body.model, live=streaming)
    timeout_s = engine.settings.chat.reply_timeout_s
    if not streaming:
        return JSONResponse(await chat.complete(timeout_s))
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(
        chat.stream(timeout_s, include_usage),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def _conversation(
    engine: Engine, caller: Caller, body: ChatCompletionRequest
) -> tuple[str | None, UserDescriptor]:
    """The agent the model names (None: the caller's own, not made yet) and its descriptor."""
    if named_agent(body.model) is None:
        descriptor = UserDescriptor(
            connector=OPENAI_CONNECTOR, userId=caller.owner, channelId=channel_of(body.user)
        )
        return engine.agents.agent_id_for(descriptor), descriptor
    entry = _agent_of(engine, caller, body.model)
    assert isinstance(entry.descriptor, UserDescriptor)
    return entry.agent_id, entry.descriptor


async def _say(engine: Engine, message: InboundMessage, *, model: str, live: bool) -> ChatTurn:
    """Post the message as a connector does (durable when this returns) and follow its turn;
    ``live``: watch its events too, from before it is posted (a fast turn's first events
    come before the post returns)."""
    assert message.message_id is not None
    watch = TurnWatch(engine.events, message.message_id) if live else None
    try:
        turn = await engine.agents.submit_inbound(message)
    except BaseException:
        if watch is not None:
            watch.close()
        raise
    if turn.duplicate and watch is not None:
        watch.close()  # posted before (an Idempotency-Key seen again): follow that turn
        watch = None
    return ChatTurn(engine.agents, turn, model=model, new_message=not turn.duplicate, watch=watch)


def _model_info(entry: IndexEntry) -> ModelInfo:
    descriptor = entry.descriptor
    assert isinstance(descriptor, UserDescriptor)
    return ModelInfo(
        id=agent_model(entry.agent_id),
        object="model",
        created=entry.created_at // 1000,
        owned_by="claybot",
        claybot=AgentModel(
            agentId=entry.agent_id, owner=descriptor.userId, user=descriptor.channelId
        ),
    )


def _default_model(engine: Engine) -> ModelInfo:
    return ModelInfo(
        id=DEFAULT_MODEL,
        object="model",
        created=int(engine.started_at.timestamp()),
        owned_by="claybot",
    )


@router.get(
    "/models",
    summary="The models this caller may use: `claybot` and its agents",
)
async def list_models(request: Request) -> ModelList:
    engine = engine_of(request)
    caller = Caller(request)
    models = [_default_model(engine)]
    for entry in engine.agents.listings.conversations(OPENAI_CONNECTOR):
        if caller.may_talk_to(entry.descriptor):
            models.append(_model_info(entry))
    return ModelList(object="list", data=models)


@router.get(
    "/models/{model}",
    summary="One model this caller may use",
    responses=openai_errors(404),
)
async def get_model(request: Request, model: str) -> ModelInfo:
    engine = engine_of(request)
    if model == DEFAULT_MODEL:
        return _default_model(engine)
    try:
        entry = _agent_of(engine, Caller(request), model)
    except ModelNotFound as exc:
        exc.field = None  # a path parameter, not a body field
        raise
    return _model_info(entry)
