"""Providers and credentials (seed 000): auth.json's entries, and settings.json's
providers in priority order, each change rebuilding the live providers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from claybot.api.deps import ConfigurationDep, ProviderAdminDep
from claybot.api.errors import fields_in_body
from claybot.api.responses import BODY_ERRORS, errors
from claybot.config.settings import ProviderSettings
from claybot.kernel.errors import NotFound
from claybot.providers.admin import Providers
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import SetAuth, UpsertProvider
from claybot.wire.providers import (
    AuthFieldSet,
    AuthListing,
    AuthRemoved,
    ProviderList,
    ProviderListing,
    ProviderTested,
)

router = APIRouter(prefix="/v1/engine", route_class=AnswerRoute)


@router.get("/auth", summary="auth.json's entries and their fields' names (never values)")
async def list_auth(configuration: ConfigurationDep) -> AuthListing:
    auth = configuration.read_auth()
    entries = {entry_id: entry.redacted() for entry_id, entry in auth.root.items()}
    return AuthListing.model_validate({"ok": True, "entries": entries})


@router.delete(
    "/auth/{entryId}",
    summary="Remove an entry of auth.json, or one field of it (?key=)",
    responses=errors(404, 422),
)
async def remove_auth(
    configuration: ConfigurationDep,
    entryId: str,
    key: Annotated[str | None, Query(max_length=200)] = None,
) -> AuthRemoved:
    if not await configuration.remove_auth(entryId, key):
        what = f"{entryId}.{key}" if key else entryId
        raise NotFound(f"auth.json has no {what!r}", field="key" if key else "entryId")
    answer = {"ok": True, "id": entryId} | ({"key": key} if key else {})
    return AuthRemoved.model_validate(answer)


@router.post(
    "/auth", summary="Set one credential field in auth.json", responses=errors(*BODY_ERRORS)
)
async def set_auth(configuration: ConfigurationDep, body: SetAuth) -> AuthFieldSet:
    with fields_in_body():  # an entry's type must be one auth.json knows
        await configuration.set_auth_field(body.id, body.key, body.value)
    return AuthFieldSet(ok=True, id=body.id, key=body.key)


@router.get("/providers", summary="Configured inference providers in priority order")
async def list_providers(admin: ProviderAdminDep) -> ProviderListing:
    current = admin.current()
    return ProviderListing.model_validate(
        {
            "ok": True,
            "providers": [p.to_public_dict() for p in current.settings],
            "types": [
                {"type": t.type, "label": t.label, "description": t.description}
                for t in admin.types()
            ],
            "failures": current.failures,
        }
    )


def _listed(providers: Providers) -> ProviderList:
    public = [provider.to_public_dict() for provider in providers.settings]
    return ProviderList.model_validate(
        {"ok": True, "providers": public, "failures": providers.failures}
    )


@router.post("/providers", summary="Add or replace a provider", responses=errors(*BODY_ERRORS))
async def upsert_provider(admin: ProviderAdminDep, body: UpsertProvider) -> ProviderList:
    provider = ProviderSettings.model_validate(body.model_dump(exclude={"position"}))
    return _listed(await admin.put(provider, body.position))


@router.post(
    "/providers/{providerId}/enable",
    summary="Use a provider again (it keeps its place in the order)",
    responses=errors(404),
)
async def enable_provider(admin: ProviderAdminDep, providerId: str) -> ProviderList:
    return _listed(await admin.enable(providerId, True))


@router.post(
    "/providers/{providerId}/disable",
    summary="Keep a provider in settings.json but do not use it",
    responses=errors(404),
)
async def disable_provider(admin: ProviderAdminDep, providerId: str) -> ProviderList:
    return _listed(await admin.enable(providerId, False))


@router.post(
    "/providers/{providerId}/test",
    summary="Make one small real call to a provider and say how it went",
    responses=errors(404),
)
async def test_provider(admin: ProviderAdminDep, providerId: str) -> ProviderTested:
    outcome = await admin.test(providerId)
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
async def remove_provider(admin: ProviderAdminDep, providerId: str) -> ProviderList:
    return _listed(await admin.remove(providerId))


@router.post(
    "/providers/{providerId}/default",
    summary="Make a provider the first choice",
    responses=errors(404),
)
async def default_provider(admin: ProviderAdminDep, providerId: str) -> ProviderList:
    return _listed(await admin.make_default(providerId))
