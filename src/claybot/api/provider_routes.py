"""Providers and credentials (seed 000): auth.json's entries, and settings.json's
providers in priority order, each change rebuilding the live providers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request

from claybot.api.errors import fields_in_body
from claybot.api.models.base import AnswerRoute
from claybot.api.models.providers import (
    AuthFieldSet,
    AuthListing,
    AuthRemoved,
    ProviderList,
    ProviderListing,
    ProviderTested,
)
from claybot.api.responses import BODY_ERRORS, errors
from claybot.api.routes import engine_of
from claybot.api.schemas import SetAuth, UpsertProvider
from claybot.config.settings import ProviderSettings, Settings
from claybot.kernel.errors import ClayError, NotFound
from claybot.providers.probe import probe
from claybot.providers.registry import DEFAULT_PROVIDER, with_provider

router = APIRouter(prefix="/v1/engine", route_class=AnswerRoute)


class ProviderNotFound(NotFound):
    code = "provider_not_found"

    def __init__(self, provider_id: str) -> None:
        super().__init__(f"no provider with id {provider_id!r}", field="providerId")


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
