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

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import StreamingResponse

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.durable_port import IndexEntry
from claybot.api.deps import AgentsDep, ConfigurationDep, EventsDep, FilesDep, StatusDep
from claybot.api.openai.bodies import ChatCompletionRequest
from claybot.api.openai.chat import Caller, OpenAiChat
from claybot.api.openai.conversation import (
    DEFAULT_MODEL,
    ModelNotFound,
    agent_model,
    read_conversation,
)
from claybot.api.responses import openai_errors
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


async def caller_of(request: Request) -> Caller:
    """Who is asking: the API key on TCP, the owner on the Unix socket."""
    record = request.scope.get("state", {}).get("api_key")
    if record is None:
        return Caller.of(None, ())
    return Caller.of(str(record.id), record.scopes)


async def openai_chat(
    agents: AgentsDep, events: EventsDep, files: FilesDep, configuration: ConfigurationDep
) -> OpenAiChat:
    return OpenAiChat(agents, events, files, configuration)


async def engine_started_at(status: StatusDep) -> datetime:
    """When the engine started: the ``created`` of the model ``claybot``."""
    return status.started_at


CallerDep = Annotated[Caller, Depends(caller_of)]
ChatDep = Annotated[OpenAiChat, Depends(openai_chat)]
StartedAt = Annotated[datetime, Depends(engine_started_at)]


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
    chat: ChatDep,
    caller: CallerDep,
    body: ChatCompletionRequest,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=256)] = None,
) -> Any:
    said = read_conversation(body.messages)  # refuses a request with nothing new to say
    streaming = bool(body.stream)
    turn = await chat.turn(
        caller,
        said,
        model=body.model,
        user=body.user,
        idempotency_key=idempotency_key,
        live=streaming,
    )
    timeout_s = chat.reply_timeout_s
    if not streaming:
        return await turn.complete(timeout_s)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(
        turn.stream(timeout_s, include_usage),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


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


def _default_model(started_at: datetime) -> ModelInfo:
    return ModelInfo(
        id=DEFAULT_MODEL,
        object="model",
        created=int(started_at.timestamp()),
        owned_by="claybot",
    )


@router.get(
    "/models",
    summary="The models this caller may use: `claybot` and its agents",
)
async def list_models(chat: ChatDep, caller: CallerDep, started_at: StartedAt) -> ModelList:
    models = [_default_model(started_at), *(_model_info(entry) for entry in chat.models(caller))]
    return ModelList(object="list", data=models)


@router.get(
    "/models/{model}",
    summary="One model this caller may use",
    responses=openai_errors(404),
)
async def get_model(
    chat: ChatDep, caller: CallerDep, started_at: StartedAt, model: str
) -> ModelInfo:
    if model == DEFAULT_MODEL:
        return _default_model(started_at)
    try:
        entry = chat.agent_of(caller, model)
    except ModelNotFound as exc:
        exc.field = None  # a path parameter, not a body field
        raise
    return _model_info(entry)
