"""The dashboard's API keys page (Settings): create with scopes, shown once; revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from claybot.api.deps import KeysDep
from claybot.db.keys import SCOPES
from claybot.engine.keystore import DeferredApiKeyStore
from claybot.kernel.errors import ClayError
from claybot.web.rendering import page, see_other
from claybot.web.routes import guard, guard_form

router = APIRouter(include_in_schema=False)


async def _keys_page(
    request: Request,
    keys: DeferredApiKeyStore,
    status_code: int = 200,
    created: str | None = None,
    problem: str = "",
) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    records = await keys.list()
    return page(
        request,
        "keys.html",
        status_code=status_code,
        session=session,
        keys=sorted(records, key=lambda record: record.created_at, reverse=True),
        scopes=sorted(SCOPES),
        created=created,
        problem=problem,
    )


@router.get("/settings/keys")
async def keys_page(request: Request, keys: KeysDep) -> Response:
    return await _keys_page(request, keys)


@router.post("/settings/keys")
async def create_key(
    request: Request,
    keys: KeysDep,
    name: Annotated[str, Form(max_length=128)] = "",
    scopes: Annotated[list[str] | None, Form()] = None,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    if not name.strip():
        return await _keys_page(request, keys, 422, problem="A key needs a name.")
    try:
        _, plaintext = await keys.create(name.strip(), scopes or [])
    except ClayError as exc:  # no scope, an unknown one, or the database is away
        return await _keys_page(request, keys, exc.status, problem=str(exc))
    # Shown in this answer only: the engine keeps its hash, and the page is not cached.
    return await _keys_page(request, keys, 201, created=plaintext)


@router.post("/settings/keys/{key_id}/revoke")
async def revoke_key(
    request: Request,
    keys: KeysDep,
    key_id: str,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    if await keys.revoke(key_id) is None:
        return await _keys_page(request, keys, 404, problem=f"No API key {key_id}.")
    return see_other("/settings/keys")
