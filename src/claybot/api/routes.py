"""The engine control API (seed 000), served on the socket and, behind API keys, on TCP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Body, Header, Query, Request

from claybot.agents.system import AgentNotFound
from claybot.api.errors import fields_in_body
from claybot.api.models.agents import (
    AgentList,
    AgentReset,
    AgentStopped,
    BackgroundAgentList,
    MessageAccepted,
)
from claybot.api.models.base import AnswerRoute, Ok
from claybot.api.models.history import AgentHistory
from claybot.api.models.keys import ApiKey, ApiKeyCreated, ApiKeyList, ApiKeyRevoked
from claybot.api.models.plugins import PluginListing, PluginLoaded, PluginUnloaded
from claybot.api.models.providers import (
    AuthFieldSet,
    AuthListing,
    AuthRemoved,
    ProviderList,
    ProviderListing,
    ProviderTested,
)
from claybot.api.models.status import EngineStatus
from claybot.api.responses import BODY_ERRORS, errors
from claybot.api.schemas import (
    CreateKey,
    LoadPlugin,
    PostMessage,
    ResetAgent,
    SetAuth,
    UnloadPlugin,
    UpsertProvider,
)
from claybot.api.sse import EventStream
from claybot.config.settings import ProviderSettings, Settings
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from claybot.kernel.errors import ClayError, NotFound
from claybot.providers.probe import probe
from claybot.providers.registry import DEFAULT_PROVIDER, with_provider

router = APIRouter(prefix="/v1/engine", route_class=AnswerRoute)
SSE_PING_S = 15
RESET_WAIT_S = 10.0


def engine_of(request: Request) -> Engine:
    engine = request.app.state.engine
    assert isinstance(engine, Engine)
    return engine


class ProviderNotFound(NotFound):
    code = "provider_not_found"

    def __init__(self, provider_id: str) -> None:
        super().__init__(f"no provider with id {provider_id!r}", field="providerId")


# -- status ---------------------------------------------------------------------


@router.get("/status", summary="Engine status with named plugins, connectors and providers")
async def status(request: Request) -> EngineStatus:
    return EngineStatus.model_validate({"ok": True, **engine_of(request).status()})


@router.post("/shutdown", summary="Stop the engine gracefully")
async def shutdown(request: Request) -> Ok:
    request.app.state.request_shutdown()
    return Ok(ok=True)


# -- agents -----------------------------------------------------------------------


@router.get("/agents", summary="Every agent, most recently active first")
async def list_agents(request: Request) -> AgentList:
    return AgentList.model_validate({"ok": True, "agents": engine_of(request).agents.list_agents()})


@router.get("/agents/background", summary="Background agents, derived from persisted state")
async def background_agents(request: Request) -> BackgroundAgentList:
    agents = engine_of(request).agents.background_agents()
    return BackgroundAgentList.model_validate({"ok": True, "agents": agents})


@router.get(
    "/agents/{agentId}/history",
    summary="An agent's history, paged by record number",
    responses=errors(404, 422),
    description=(
        "Records are numbered from 0 (`seq`) and come oldest first. Without `after`, the "
        "page is the newest `limit` records (below `before`, if given); with `after`, the "
        "oldest `limit` records above it (and below `before`, if given): with both, the "
        "records with after < seq < before."
    ),
)
async def agent_history(
    request: Request,
    agentId: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[int | None, Query(ge=0, description="records numbered below this")] = None,
    after: Annotated[int | None, Query(ge=-1, description="records numbered above this")] = None,
) -> AgentHistory:
    engine = engine_of(request)
    if after is not None and before is not None:
        # Paging forward from ``after``; the records from ``before`` on are left out.
        page = await engine.agents.history(agentId, after=after, before=None, limit=limit)
        records = [record for record in page.records if record["seq"] < before]
    else:
        page = await engine.agents.history(agentId, after=after, before=before, limit=limit)
        records = page.records
    return AgentHistory.model_validate(
        {"ok": True, "agentId": agentId, "total": page.total, "records": records}
    )


@router.post(
    "/agents/{agentId}/reset",
    summary="Clear an agent's context, keeping its id",
    responses=errors(*BODY_ERRORS, 404, 503),
)
async def reset_agent(
    request: Request,
    agentId: str,
    body: Annotated[ResetAgent | None, Body()] = None,
) -> AgentReset:
    engine = engine_of(request)
    turn = await engine.agents.reset(agentId, body.message if body else None)
    try:
        await turn.outcome(RESET_WAIT_S)
        done = True
    except TimeoutError:
        done = False  # a long turn is still running; the reset is queued behind it
    return AgentReset(ok=True, agentId=agentId, status="done" if done else "queued")


@router.post(
    "/agents/{agentId}/stop",
    summary="Stop the agent's running turn (what /stop does in a chat)",
    responses=errors(404),
)
async def stop_agent(request: Request, agentId: str) -> AgentStopped:
    engine = engine_of(request)
    if agentId not in engine.agents.directory:
        raise AgentNotFound(agentId)
    return AgentStopped(ok=True, agentId=agentId, stopped=engine.agents.abort(agentId))


# -- messages -----------------------------------------------------------------------


@router.post(
    "/messages",
    status_code=202,
    summary="Post a message from the local connector",
    responses=errors(*BODY_ERRORS, 503),
)
async def post_message(request: Request, body: PostMessage) -> MessageAccepted:
    engine = engine_of(request)
    posted = await engine.post_inbound(
        InboundMessage(
            connector=body.connector,
            user_id=body.userId,
            channel_id=body.channelId,
            text=body.text,
            message_id=body.messageId,
        )
    )
    return MessageAccepted(
        ok=True, agentId=posted.agent_id, messageId=posted.message_id, duplicate=posted.duplicate
    )


# -- plugins --------------------------------------------------------------------------


@router.get("/plugins", summary="Loaded and configured plugin instances, and the catalog")
async def list_plugins(request: Request) -> PluginListing:
    return PluginListing.model_validate({"ok": True, **engine_of(request).plugins.listing()})


@router.post(
    "/plugins/load",
    summary="Load a plugin instance (validated, then persisted)",
    responses=errors(*BODY_ERRORS, 404, 409, 502, 503),
)
async def load_plugin(request: Request, body: LoadPlugin) -> PluginLoaded:
    loaded = await engine_of(request).configuration.load_plugin(
        body.pluginId, body.instanceId, body.settings
    )
    return PluginLoaded.model_validate({"ok": True, "plugin": loaded})


@router.post(
    "/plugins/unload",
    summary="Unload a plugin instance (persisted as disabled)",
    responses=errors(*BODY_ERRORS, 404, 409),
)
async def unload_plugin(request: Request, body: UnloadPlugin) -> PluginUnloaded:
    await engine_of(request).configuration.unload_plugin(body.instanceId)
    return PluginUnloaded(ok=True, instanceId=body.instanceId)


# -- auth and providers ---------------------------------------------------------------


@router.get("/auth", summary="auth.json's entries and their fields' names (never values)")
async def list_auth(request: Request) -> AuthListing:
    auth = engine_of(request).config.read_auth()
    entries = {entry_id: entry.redacted() for entry_id, entry in auth.root.items()}
    return AuthListing.model_validate({"ok": True, "entries": entries})


@router.delete(
    "/auth/{entryId}",
    summary="Remove an entry of auth.json, or one field of it (?key=)",
    responses=errors(404, 422),
)
async def remove_auth(
    request: Request,
    entryId: str,
    key: Annotated[str | None, Query(max_length=200)] = None,
) -> AuthRemoved:
    if not await engine_of(request).configuration.remove_auth(entryId, key):
        what = f"{entryId}.{key}" if key else entryId
        raise NotFound(f"auth.json has no {what!r}", field="key" if key else "entryId")
    answer = {"ok": True, "id": entryId} | ({"key": key} if key else {})
    return AuthRemoved.model_validate(answer)


@router.post(
    "/auth", summary="Set one credential field in auth.json", responses=errors(*BODY_ERRORS)
)
async def set_auth(request: Request, body: SetAuth) -> AuthFieldSet:
    with fields_in_body():  # an entry's type must be one auth.json knows
        await engine_of(request).configuration.set_auth_field(body.id, body.key, body.value)
    return AuthFieldSet(ok=True, id=body.id, key=body.key)


@router.get("/providers", summary="Configured inference providers in priority order")
async def list_providers(request: Request) -> ProviderListing:
    engine = engine_of(request)
    return ProviderListing.model_validate(
        {
            "ok": True,
            "providers": [p.to_public_dict() for p in engine.settings.providers],
            "types": [
                {"type": t.type, "label": t.label, "description": t.description}
                for t in engine.provider_registry.types()
            ],
            "failures": engine.providers.failures,
        }
    )


def _providers(settings: Settings, failures: dict[str, str]) -> ProviderList:
    public = [provider.to_public_dict() for provider in settings.providers]
    return ProviderList.model_validate({"ok": True, "providers": public, "failures": failures})


@router.post("/providers", summary="Add or replace a provider", responses=errors(*BODY_ERRORS))
async def upsert_provider(request: Request, body: UpsertProvider) -> ProviderList:
    engine = engine_of(request)
    provider = ProviderSettings.model_validate(body.model_dump(exclude={"position"}))
    if engine.provider_registry.get(provider.provider_type) is None:
        known = ", ".join(sorted(t.type for t in engine.provider_registry.types()))
        raise ClayError(
            f"unknown provider type {provider.provider_type!r} (known: {known})",
            code="unknown_provider_type",
            field="type",
        )
    settings = engine.settings.model_copy(deep=True)
    settings.providers = with_provider(settings.providers, provider, body.position)
    await engine.configuration.update_settings(settings)
    return _providers(settings, engine.providers.failures)


ProviderChange = Callable[[list[ProviderSettings], ProviderSettings], list[ProviderSettings]]


async def _change_provider(
    request: Request, provider_id: str, change: ProviderChange
) -> ProviderList:
    """settings.json's providers as ``change`` leaves them, given the one named (404 if
    there is none); the providers are rebuilt, and the answer says which failed."""
    engine = engine_of(request)
    settings = engine.settings.model_copy(deep=True)
    chosen = next((p for p in settings.providers if p.id == provider_id), None)
    if chosen is None:
        raise ProviderNotFound(provider_id)
    settings.providers = change(settings.providers, chosen)
    await engine.configuration.update_settings(settings)
    return _providers(settings, engine.providers.failures)


def _enabled(enabled: bool) -> ProviderChange:
    def change(
        providers: list[ProviderSettings], chosen: ProviderSettings
    ) -> list[ProviderSettings]:
        chosen.enabled = enabled
        return providers

    return change


@router.post(
    "/providers/{providerId}/enable",
    summary="Use a provider again (it keeps its place in the order)",
    responses=errors(404),
)
async def enable_provider(request: Request, providerId: str) -> ProviderList:
    return await _change_provider(request, providerId, _enabled(True))


@router.post(
    "/providers/{providerId}/disable",
    summary="Keep a provider in settings.json but do not use it",
    responses=errors(404),
)
async def disable_provider(request: Request, providerId: str) -> ProviderList:
    return await _change_provider(request, providerId, _enabled(False))


@router.post(
    "/providers/{providerId}/test",
    summary="Make one small real call to a provider and say how it went",
    responses=errors(404),
)
async def test_provider(request: Request, providerId: str) -> ProviderTested:
    engine = engine_of(request)
    settings = engine.settings
    chosen = next((p for p in settings.providers if p.id == providerId), None)
    if chosen is None and providerId == DEFAULT_PROVIDER.id and not settings.providers:
        chosen = DEFAULT_PROVIDER  # the one the engine uses when none is configured
    if chosen is None:
        raise ProviderNotFound(providerId)
    live = next((p for p in engine.providers.router.providers if p.id == providerId), None)
    outcome = await probe(
        chosen,
        engine.config.read_auth().get(chosen.id),
        engine.options.env,
        engine.provider_registry,
        live,
    )
    return ProviderTested(
        ok=True,
        providerId=outcome.provider_id,
        answered=outcome.answered,
        answer=outcome.answer,
        reason=outcome.reason,
        model=outcome.model,
        latencyMs=outcome.latency_ms,
    )


@router.delete("/providers/{providerId}", summary="Remove a provider", responses=errors(404))
async def remove_provider(request: Request, providerId: str) -> ProviderList:
    return await _change_provider(
        request, providerId, lambda providers, chosen: [p for p in providers if p is not chosen]
    )


@router.post(
    "/providers/{providerId}/default",
    summary="Make a provider the first choice",
    responses=errors(404),
)
async def default_provider(request: Request, providerId: str) -> ProviderList:
    return await _change_provider(
        request,
        providerId,
        lambda providers, chosen: [chosen, *(p for p in providers if p is not chosen)],
    )


# -- API keys ---------------------------------------------------------------------------


@router.get("/keys", summary="API keys (never the keys themselves)", responses=errors(503))
async def list_keys(request: Request) -> ApiKeyList:
    records = await engine_of(request).keys.list()
    return ApiKeyList(ok=True, keys=[ApiKey.of(record) for record in records])


@router.post(
    "/keys",
    status_code=201,
    summary="Create an API key; the key is returned once",
    responses=errors(*BODY_ERRORS, 503),
)
async def create_key(request: Request, body: CreateKey) -> ApiKeyCreated:
    engine = engine_of(request)
    record, plaintext = await engine.keys.create(body.name, body.scopes, body.rateLimitRpm)
    return ApiKeyCreated(ok=True, key=plaintext, record=ApiKey.of(record))


@router.post(
    "/keys/{keyId}/revoke",
    summary="Revoke an API key by id or prefix",
    responses=errors(404, 503),
)
async def revoke_key(request: Request, keyId: str) -> ApiKeyRevoked:
    record = await engine_of(request).keys.revoke(keyId)
    if record is None:
        raise NotFound(
            f"no API key with id or prefix {keyId!r}", code="key_not_found", field="keyId"
        )
    return ApiKeyRevoked(ok=True, record=ApiKey.of(record))


# -- events -------------------------------------------------------------------------------


def resume_after(last_event_id: str | None, since: int | None = None) -> int | None:
    """The event id a reconnecting stream resumes after (the header wins over ``since``)."""
    if last_event_id is None:
        return since
    try:
        return int(last_event_id)
    except ValueError as exc:
        raise ClayError(
            "Last-Event-ID must be an integer", code="invalid_request", field="Last-Event-ID"
        ) from exc


@router.get(
    "/events",
    summary="Server-sent events: an init frame, then replay, then live events",
    response_class=EventStream,
    status_code=200,
    responses=errors(400, 422),
)
async def events(
    request: Request,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    since: Annotated[int | None, Query(description="same as the Last-Event-ID header")] = None,
) -> EventStream:
    engine = engine_of(request)
    subscription = engine.events.subscribe(resume_after(last_event_id, since))
    init = {
        "id": engine.events.last_id,
        "type": "init",
        "payload": {
            "status": engine.status(),
            "cron": engine.cron.listing(),
            "heartbeat": (await engine.heartbeat.listing())["tasks"],
            "backgroundAgents": engine.agents.background_agents(),
            "replayed": subscription.replayed,
            "gap": subscription.gap,
        },
        "timestamp": None,
    }
    return EventStream(init, subscription, ping_s=SSE_PING_S)
