"""The dashboard's Providers and Credentials pages (Settings).

Providers: settings.json's list in priority order with each one's state, moved up or
down, removed and added through the engine's own order (``with_provider``, as the
API's ``POST /providers`` with a ``position`` and the CLI's ``--position`` do) and
``configuration.update_settings``, which rebuilds the live providers.

Credentials: auth.json's entries and their fields' names, never a value; a value is
set through ``configuration.set_auth_field`` from a password box and is not sent back
in any answer, not even the form shown again after a refusal.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError

from claybot.api.dashboard.auth import Session
from claybot.api.dashboard.rendering import page, see_other
from claybot.api.dashboard.routes import guard, guard_form
from claybot.api.routes import engine_of
from claybot.api.schemas import SetAuth
from claybot.config.redaction import redact_named
from claybot.config.settings import ProviderSettings
from claybot.engine.engine import Engine
from claybot.kernel.errors import ClayError
from claybot.providers.registry import with_provider

router = APIRouter(include_in_schema=False)
EMPTY_PROVIDER_FORM = {"id": "", "type": "", "model": "", "position": "", "options": ""}


def _first_problem(exc: ValidationError) -> str:
    """The first problem, without the value (it may be a secret)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


# -- providers -------------------------------------------------------------------------


def _provider_rows(engine: Engine) -> list[dict[str, Any]]:
    """settings.json's providers in priority order, with the label and the state the
    engine reports (ready, not built and why, or disabled)."""
    labels = {provider.id: provider.label for provider in engine.providers.router.providers}
    failures = engine.providers.failures
    rows = []
    for provider in engine.settings.providers:
        public = provider.to_public_dict()
        if not provider.enabled:
            state, problem = "disabled", ""
        elif provider.id in failures:
            state, problem = "not built", failures[provider.id]
        else:
            state, problem = "ready", ""
        rows.append({
            "id": provider.id,
            "type": provider.provider_type,
            "model": provider.model or "",
            "label": labels.get(provider.id, ""),
            "options": json.dumps(public["options"]) if public.get("options") else "",
            "state": state,
            "problem": problem,
        })  # fmt: skip
    return rows


def _providers_page(
    request: Request,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    engine = engine_of(request)
    return page(
        request,
        "settings_providers.html",
        status_code=status_code,
        session=session,
        providers=_provider_rows(engine),
        types=sorted(engine.provider_registry.types(), key=lambda t: t.type),
        form=form or EMPTY_PROVIDER_FORM,
        problem=problem,
    )


@router.get("/settings/providers")
async def providers(request: Request) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return _providers_page(request, session)


async def _put(engine: Engine, provider: ProviderSettings, position: int | None) -> None:
    """settings.json with ``provider`` added, or moved to ``position``; providers rebuilt."""
    settings = engine.settings.model_copy(deep=True)
    settings.providers = with_provider(settings.providers, provider, position)
    await engine.configuration.update_settings(settings)


@router.post("/settings/providers")
async def add_provider(
    request: Request,
    id: Annotated[str, Form(max_length=64)] = "",
    type: Annotated[str, Form(max_length=64)] = "",
    model: Annotated[str, Form(max_length=256)] = "",
    position: Annotated[str, Form(max_length=8)] = "",
    options: Annotated[str, Form(max_length=32_000)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    engine = engine_of(request)
    form = {"id": id, "type": type, "model": model, "position": position, "options": options}
    try:
        parsed_options = json.loads(options) if options.strip() else {}
    except ValueError:
        return _providers_page(request, session, 422, form, "Options are not valid JSON.")
    if redact_named(parsed_options) != parsed_options:
        form["options"] = ""  # a key typed here is not sent back; Credentials is its place
    if not isinstance(parsed_options, dict):
        return _providers_page(request, session, 422, form, "Options must be a JSON object.")
    if position.strip() and not position.strip().isdecimal():  # isdigit() takes "²"
        return _providers_page(request, session, 422, form, "The position is a number from 0.")
    fields: dict[str, Any] = {"id": id.strip(), "options": parsed_options}
    if type.strip():
        fields["type"] = type.strip()
    if model.strip():
        fields["model"] = model.strip()
    try:
        provider = ProviderSettings.model_validate(fields)
    except ValidationError as exc:
        return _providers_page(request, session, 422, form, _first_problem(exc))
    if engine.provider_registry.get(provider.provider_type) is None:
        return _providers_page(
            request, session, 422, form, f"Unknown provider type {provider.provider_type!r}."
        )
    slot = int(position) if position.strip() else None
    try:
        await _put(engine, provider, slot)
    except ClayError as exc:
        return _providers_page(request, session, exc.status, form, exc.message)
    return see_other("/settings/providers")


@router.post("/settings/providers/{provider_id}/{verb}")
async def change_provider(
    request: Request,
    provider_id: str,
    verb: Literal["up", "down", "remove"],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    engine = engine_of(request)
    current = engine.settings.providers
    index = next((i for i, p in enumerate(current) if p.id == provider_id), None)
    if index is None:
        return _providers_page(request, session, 404, problem=f"No provider {provider_id}.")
    try:
        if verb == "remove":
            settings = engine.settings.model_copy(deep=True)
            settings.providers = [p for p in settings.providers if p.id != provider_id]
            await engine.configuration.update_settings(settings)
        else:  # its place among the others: one before or one after where it is
            slot = max(index - 1, 0) if verb == "up" else index + 1
            await _put(engine, current[index].model_copy(deep=True), slot)
    except ClayError as exc:
        return _providers_page(request, session, exc.status, problem=exc.message)
    return see_other("/settings/providers")


# -- credentials -------------------------------------------------------------------------


def _credentials_page(
    request: Request,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    engine = engine_of(request)
    auth = engine.config.read_auth()
    entries = [(entry_id, entry.redacted()) for entry_id, entry in sorted(auth.root.items())]
    # Where a credential is looked up: a provider's id or a plugin instance's id.
    known = sorted(
        {p.id for p in engine.settings.providers}
        | {e["instanceId"] for e in engine.plugins.configured()}
    )
    return page(
        request,
        "settings_credentials.html",
        status_code=status_code,
        session=session,
        entries=entries,
        known=known,
        form=form or {"id": "", "key": "apiKey"},
        problem=problem,
    )


@router.get("/settings/credentials")
async def credentials(request: Request) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return _credentials_page(request, session)


@router.post("/settings/credentials")
async def set_credential(
    request: Request,
    id: Annotated[str, Form(max_length=64)] = "",
    key: Annotated[str, Form(max_length=64)] = "",
    value: Annotated[str, Form(max_length=8192)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    form = {"id": id, "key": key}  # never the value
    try:
        body = SetAuth(id=id.strip(), key=key.strip(), value=value)
        await engine_of(request).configuration.set_auth_field(body.id, body.key, body.value)
    except ValidationError as exc:
        return _credentials_page(request, session, 422, form, _first_problem(exc))
    except ClayError as exc:
        status = 422 if exc.status == 400 else exc.status
        return _credentials_page(request, session, status, form, exc.message)
    return see_other("/settings/credentials")


@router.post("/settings/credentials/{entry_id}/delete")
async def delete_credential(
    request: Request,
    entry_id: str,
    key: Annotated[str | None, Form(max_length=64)] = None,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """Remove an entry, or one field of it (``key``)."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    if not await engine_of(request).configuration.remove_auth(entry_id, key or None):
        what = f"{entry_id}.{key}" if key else entry_id
        return _credentials_page(request, session, 404, problem=f"auth.json has no {what}.")
    return see_other("/settings/credentials")
