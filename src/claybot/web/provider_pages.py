"""The dashboard's Providers and Credentials pages (Settings).

Providers: settings.json's list in priority order with each one's state, moved up or
down, removed and added through the engine's own order (``with_provider``, as the
API's ``POST /providers`` with a ``position`` and the CLI's ``--position`` do) by
``ProviderAdmin``, the service behind the API's provider routes as well.

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

from claybot.api.dashboard_auth import Session
from claybot.api.deps import ConfigurationDep, ProviderAdminDep
from claybot.config.redaction import redact_named
from claybot.config.settings import ProviderSettings
from claybot.engine.configuration import LiveConfiguration
from claybot.kernel.errors import ClayError
from claybot.providers.admin import ProviderAdmin, ProviderNotFound, UnknownProviderType
from claybot.web.rendering import page, see_other
from claybot.web.routes import guard, guard_form
from claybot.wire.bodies import SetAuth

router = APIRouter(include_in_schema=False)
EMPTY_PROVIDER_FORM = {"id": "", "type": "", "model": "", "position": "", "options": ""}


def _first_problem(exc: ValidationError) -> str:
    """The first problem, without the value (it may be a secret)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


# -- providers -------------------------------------------------------------------------


def _provider_rows(admin: ProviderAdmin) -> list[dict[str, str]]:
    """settings.json's providers in priority order, with the label and the state the
    engine reports (ready, not built and why, or disabled)."""
    rows = []
    for row in admin.rows():
        public = row.settings.to_public_dict()
        rows.append({
            "id": row.settings.id,
            "type": row.settings.provider_type,
            "model": row.settings.model or "",
            "label": row.label,
            "options": json.dumps(public["options"]) if public.get("options") else "",
            "state": row.state,
            "problem": row.problem,
        })  # fmt: skip
    return rows


def _providers_page(
    request: Request,
    admin: ProviderAdmin,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    return page(
        request,
        "settings_providers.html",
        status_code=status_code,
        session=session,
        providers=_provider_rows(admin),
        types=sorted(admin.types(), key=lambda kind: kind.type),
        form=form or EMPTY_PROVIDER_FORM,
        problem=problem,
    )


@router.get("/settings/providers")
async def providers(request: Request, admin: ProviderAdminDep) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return _providers_page(request, admin, session)


@router.post("/settings/providers")
async def add_provider(
    request: Request,
    admin: ProviderAdminDep,
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
    form = {"id": id, "type": type, "model": model, "position": position, "options": options}
    try:
        parsed_options = json.loads(options) if options.strip() else {}
    except ValueError:
        return _providers_page(request, admin, session, 422, form, "Options are not valid JSON.")
    if redact_named(parsed_options) != parsed_options:
        form["options"] = ""  # a key typed here is not sent back; Credentials is its place
    if not isinstance(parsed_options, dict):
        problem = "Options must be a JSON object."
        return _providers_page(request, admin, session, 422, form, problem)
    if position.strip() and not position.strip().isdecimal():  # isdigit() takes "²"
        return _providers_page(
            request, admin, session, 422, form, "The position is a number from 0."
        )
    fields: dict[str, Any] = {"id": id.strip(), "options": parsed_options}
    if type.strip():
        fields["type"] = type.strip()
    if model.strip():
        fields["model"] = model.strip()
    try:
        provider = ProviderSettings.model_validate(fields)
    except ValidationError as exc:
        return _providers_page(request, admin, session, 422, form, _first_problem(exc))
    slot = int(position) if position.strip() else None
    try:
        await admin.put(provider, slot)
    except UnknownProviderType:
        problem = f"Unknown provider type {provider.provider_type!r}."
        return _providers_page(request, admin, session, 422, form, problem)
    except ClayError as exc:
        return _providers_page(request, admin, session, exc.status, form, exc.message)
    return see_other("/settings/providers")


@router.post("/settings/providers/{provider_id}/{verb}")
async def change_provider(
    request: Request,
    admin: ProviderAdminDep,
    provider_id: str,
    verb: Literal["up", "down", "remove"],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        if verb == "remove":
            await admin.remove(provider_id)
        else:  # its place among the others: one before or one after where it is
            await admin.move(provider_id, -1 if verb == "up" else 1)
    except ProviderNotFound:
        problem = f"No provider {provider_id}."
        return _providers_page(request, admin, session, 404, problem=problem)
    except ClayError as exc:
        return _providers_page(request, admin, session, exc.status, problem=exc.message)
    return see_other("/settings/providers")


# -- credentials -------------------------------------------------------------------------


def _credentials_page(
    request: Request,
    configuration: LiveConfiguration,
    session: Session,
    status_code: int = 200,
    form: dict[str, str] | None = None,
    problem: str = "",
) -> Response:
    auth = configuration.read_auth()
    entries = [(entry_id, entry.redacted()) for entry_id, entry in sorted(auth.root.items())]
    return page(
        request,
        "settings_credentials.html",
        status_code=status_code,
        session=session,
        entries=entries,
        known=configuration.credential_owners(),
        form=form or {"id": "", "key": "apiKey"},
        problem=problem,
    )


@router.get("/settings/credentials")
async def credentials(request: Request, configuration: ConfigurationDep) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return _credentials_page(request, configuration, session)


@router.post("/settings/credentials")
async def set_credential(
    request: Request,
    configuration: ConfigurationDep,
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
        await configuration.set_auth_field(body.id, body.key, body.value)
    except ValidationError as exc:
        return _credentials_page(request, configuration, session, 422, form, _first_problem(exc))
    except ClayError as exc:
        status = 422 if exc.status == 400 else exc.status
        return _credentials_page(request, configuration, session, status, form, exc.message)
    return see_other("/settings/credentials")


@router.post("/settings/credentials/{entry_id}/delete")
async def delete_credential(
    request: Request,
    configuration: ConfigurationDep,
    entry_id: str,
    key: Annotated[str | None, Form(max_length=64)] = None,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """Remove an entry, or one field of it (``key``)."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    if not await configuration.remove_auth(entry_id, key or None):
        what = f"{entry_id}.{key}" if key else entry_id
        return _credentials_page(
            request, configuration, session, 404, problem=f"auth.json has no {what}."
        )
    return see_other("/settings/credentials")
