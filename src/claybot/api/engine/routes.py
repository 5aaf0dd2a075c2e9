"""The engine control API (seed 000), served on the socket and, behind API keys, on TCP:
status, agents, messages, plugins, API keys and the event stream. Providers and
credentials are ``provider_routes``; schedules, permissions, jobs and the others have
a router each beside it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from claybot.agents.system import AgentSystem
from claybot.api.bounds import INT64_MAX
from claybot.api.deps import (
    AgentsDep,
    ConfigurationDep,
    EngineFeedDep,
    FilesDep,
    KeysDep,
    PluginsDep,
    StatusDep,
    services_of,
)
from claybot.api.engine.history_stream import whole_history_response
from claybot.api.responses import BODY_ERRORS, errors
from claybot.api.sse import SSE_PING_S, EventStream, resume_after
from claybot.api.uploads import attached
from claybot.connectors.base import InboundMessage
from claybot.engine.status import seed_status
from claybot.files.store import FileStore
from claybot.kernel.errors import NotFound
from claybot.wire.agents import (
    AgentList,
    AgentReset,
    AgentStopped,
    BackgroundAgentList,
    MessageAccepted,
)
from claybot.wire.base import AnswerRoute, Ok
from claybot.wire.bodies import (
    NO_NUL,
    CreateKey,
    LoadPlugin,
    PostMessage,
    ResetAgent,
    UnloadPlugin,
)
from claybot.wire.history import AgentHistory
from claybot.wire.history_view import FilePath, seed_chunks, seed_records
from claybot.wire.keys import ApiKey, ApiKeyCreated, ApiKeyList, ApiKeyRevoked
from claybot.wire.plugins import PluginListing, PluginLoaded, PluginUnloaded
from claybot.wire.status import EngineStatus

router = APIRouter(prefix="/v1/engine", route_class=AnswerRoute)
RESET_WAIT_S = 10.0
PAGE_LIMIT = 100  # history records in a page when the client names no limit


def stored_file_path(files: FileStore) -> FilePath:
    """Where the file store keeps a file's bytes ("" for what is no file id)."""

    def file_path(file_id: str) -> str:
        location = files.location(file_id)
        return "" if location is None else str(location)

    return file_path


# -- status ---------------------------------------------------------------------


@router.get("/status", summary="Engine status with named plugins, connectors and providers")
async def status(view: StatusDep) -> EngineStatus:
    status = view.status()
    return EngineStatus.model_validate({"ok": True, **status, "status": seed_status(status)})


@router.post(
    "/reload",
    summary="Apply settings.json as it is on disk: providers and plugin instances",
    description=(
        "What seed 000's CLI asks for after it edits settings.json (`claybot add`, "
        "`remove`, `providers`). Plugin instances the file no longer enables, or enables "
        "with other settings, are stopped; enabled ones that are not running are loaded "
        "(a failure is listed in `GET /v1/engine/plugins`' `failures`, as at boot); the "
        "providers are built again. A settings.json that does not load changes nothing "
        "(500, `config_invalid`)."
    ),
)
async def reload(configuration: ConfigurationDep) -> Ok:
    await configuration.reload()
    return Ok(ok=True)


@router.post("/shutdown", summary="Stop the engine gracefully")
async def shutdown(request: Request) -> Ok:
    request.app.state.request_shutdown()
    return Ok(ok=True)


# -- agents -----------------------------------------------------------------------


@router.get("/agents", summary="Every agent, most recently active first")
async def list_agents(agents: AgentsDep) -> AgentList:
    return AgentList.model_validate({"ok": True, "agents": agents.listings.agents()})


@router.get("/agents/background", summary="Background agents, derived from persisted state")
async def background_agents(agents: AgentsDep) -> BackgroundAgentList:
    listed = await agents.listings.background()
    return BackgroundAgentList.model_validate({"ok": True, "agents": listed})


@router.get(
    "/agents/{agentId}/history",
    summary="An agent's history: all of it, or a page by record number",
    response_model=AgentHistory,
    responses=errors(404, 422),
    description=(
        "Records are numbered from 0 (`seq`) and come oldest first. With no `limit`, "
        "`before` or `after`, the answer holds every record (seed 000's route), streamed. "
        "Otherwise it is a page of `limit` records (100 by default). Without `after`, the "
        "page is the newest `limit` records (below `before`, if given); with `after`, the "
        "oldest `limit` records above it (and below `before`, if given): with both, the "
        "records with after < seq < before."
    ),
)
async def agent_history(
    agents: AgentsDep,
    files: FilesDep,
    agentId: str,
    limit: Annotated[
        int | None, Query(ge=1, le=1000, description="records in a page (default 100)")
    ] = None,
    before: Annotated[
        int | None, Query(ge=0, le=INT64_MAX, description="records numbered below this")
    ] = None,
    after: Annotated[
        int | None, Query(ge=-1, le=INT64_MAX, description="records numbered above this")
    ] = None,
) -> AgentHistory | StreamingResponse:
    file_path = stored_file_path(files)
    if limit is None and before is None and after is None:
        total, chunks = await agents.histories.whole(agentId)
        return whole_history_response(agentId, total, seed_chunks(chunks, file_path))
    limit = PAGE_LIMIT if limit is None else limit
    page = await agents.histories.window(agentId, after=after, before=before, limit=limit)
    return AgentHistory.model_validate(
        {
            "ok": True,
            "agentId": agentId,
            "total": page.total,
            "records": seed_records(page.records, file_path),
        }
    )


@router.post(
    "/agents/{agentId}/reset",
    summary="Clear an agent's context, keeping its id",
    responses=errors(*BODY_ERRORS, 404, 503),
)
async def reset_agent(
    agents: AgentsDep,
    agentId: str,
    body: Annotated[ResetAgent | None, Body()] = None,
) -> AgentReset:
    done = await agents.reset_within(agentId, body.message if body else None, RESET_WAIT_S)
    return AgentReset(ok=True, agentId=agentId, status="done" if done else "queued")


@router.post(
    "/agents/{agentId}/stop",
    summary="Stop the agent's running turn (what /stop does in a chat)",
    responses=errors(404),
)
async def stop_agent(agents: AgentsDep, agentId: str) -> AgentStopped:
    return AgentStopped(ok=True, agentId=agentId, stopped=agents.stop(agentId))


# -- messages -----------------------------------------------------------------------


@router.post(
    "/messages",
    status_code=202,
    response_model=MessageAccepted,
    summary="Post a message from the local connector",
    responses=errors(*BODY_ERRORS, 404, 503),
)
async def post_message(request: Request, body: PostMessage) -> Response:
    # The busiest route takes its two services from the registry itself: resolved as
    # dependencies they cost FastAPI's dependency solving per request, 15 % of the
    # socket's throughput (bench/compare_agents.py, socket rows).
    services = services_of(request)
    agents, files = services.get(AgentSystem), services.get(FileStore)
    turn = await agents.submit_inbound(
        InboundMessage(
            connector=body.connector,
            user_id=body.userId,
            channel_id=body.channelId,
            text=body.text,
            message_id=body.messageId,
            files=await attached(files, body.files),
        )
    )
    accepted = MessageAccepted(
        ok=True, agentId=turn.agent_id, messageId=turn.id, duplicate=turn.duplicate
    )
    # The busiest route: its answer is serialised here, once. Returned as a model, FastAPI
    # would dump it, validate the dump against the same model and serialise that again.
    return Response(accepted.model_dump_json(), status_code=202, media_type="application/json")


# -- plugins --------------------------------------------------------------------------


@router.get("/plugins", summary="Loaded and configured plugin instances, and the catalog")
async def list_plugins(plugins: PluginsDep) -> PluginListing:
    return PluginListing.model_validate({"ok": True, **plugins.listing()})


@router.post(
    "/plugins/load",
    summary="Load a plugin instance (validated, then persisted)",
    responses=errors(*BODY_ERRORS, 404, 409, 502, 503),
)
async def load_plugin(configuration: ConfigurationDep, body: LoadPlugin) -> PluginLoaded:
    loaded = await configuration.load_plugin(body.pluginId, body.instanceId, body.settings)
    return PluginLoaded.model_validate({"ok": True, "plugin": loaded})


@router.post(
    "/plugins/unload",
    summary="Unload a plugin instance (persisted as disabled)",
    responses=errors(*BODY_ERRORS, 404, 409),
)
async def unload_plugin(configuration: ConfigurationDep, body: UnloadPlugin) -> PluginUnloaded:
    await configuration.unload_plugin(body.instanceId)
    return PluginUnloaded(ok=True, instanceId=body.instanceId)


# -- API keys ---------------------------------------------------------------------------


@router.get("/keys", summary="API keys (never the keys themselves)", responses=errors(503))
async def list_keys(keys: KeysDep) -> ApiKeyList:
    records = await keys.list()
    return ApiKeyList(ok=True, keys=[ApiKey.of(record) for record in records])


@router.post(
    "/keys",
    status_code=201,
    summary="Create an API key; the key is returned once",
    responses=errors(*BODY_ERRORS, 503),
)
async def create_key(keys: KeysDep, body: CreateKey) -> ApiKeyCreated:
    record, plaintext = await keys.create(body.name, body.scopes, body.rateLimitRpm)
    return ApiKeyCreated(ok=True, key=plaintext, record=ApiKey.of(record))


@router.post(
    "/keys/{keyId}/revoke",
    summary="Revoke an API key by id or prefix",
    responses=errors(404, 422, 503),
)
async def revoke_key(
    keys: KeysDep, keyId: Annotated[str, Path(max_length=64, pattern=NO_NUL)]
) -> ApiKeyRevoked:
    record = await keys.revoke(keyId)
    if record is None:
        raise NotFound(
            f"no API key with id or prefix {keyId!r}", code="key_not_found", field="keyId"
        )
    return ApiKeyRevoked(ok=True, record=ApiKey.of(record))


# -- events -------------------------------------------------------------------------------


@router.get(
    "/events",
    summary="Server-sent events: an init frame, then replay, then live events",
    response_class=EventStream,
    status_code=200,
    responses=errors(400, 422),
)
async def events(
    feed: EngineFeedDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    since: Annotated[int | None, Query(description="same as the Last-Event-ID header")] = None,
) -> EventStream:
    opened = await feed.open(resume_after(last_event_id, since))
    return EventStream(opened.init, opened.subscription, ping_s=SSE_PING_S)
