"""What codeck's web client calls besides ``/api/agents``: its WebSocket, login and folder picker.

codeck (seed 004's original) is a browser app. Its WebSocket connects to the root of
its host, ``ws(s)://<host>/?token=<token>`` (a browser cannot set a header on a
WebSocket; ``tcp_auth`` takes the token out of the query string there), and reads the
types its ``ws.ts`` knows: ``status`` (for the workspace its folder picker starts at),
``heartbeat`` and the four ``agent:*`` types. It takes a connection that hears
nothing for 45 s for dead, hence the heartbeat (``proactive_routes.stream_messages``).

Its token comes from a password login. Here the password is a ClayBot API key with
``agents:read``, and the token the client keeps is that key: the login checks it as
the TCP listener does (wrong keys are limited per client address, together with the
dashboard's key login) and hands it back, so nothing new is minted, kept or logged.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, WebSocket
from pydantic import Field

from claybot.api.codeck.proactive_routes import stream_messages
from claybot.api.deps import ConfigurationDep, KeysDep, ProactiveDep, dashboard_auth_of
from claybot.api.key_check import check_key, client_address
from claybot.api.responses import BODY_ERRORS, codeck_errors
from claybot.api.tcp_auth import CODECK_WS_PATH
from claybot.db.errors import StoreError
from claybot.kernel.errors import ClayError, NotFound, Unavailable
from claybot.proactive.broadcast import Message
from claybot.proactive.errors import InvalidAgentInput
from claybot.proactive.inputs import CWD_MAX_CHARS
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import Body
from claybot.wire.codeck import AuthStatus, FolderList, LoggedIn

router = APIRouter(tags=["codeck"], route_class=AnswerRoute, responses=codeck_errors(500))

# The types codeck's ws.ts handles (besides heartbeat and status); it warns about others.
CODECK_TYPES = frozenset(
    {"agent:update", "agent:output", "agent:execution:start", "agent:execution:complete"}
)
LOGIN_SCOPE = "agents:read"  # what codeck's Agents section reads with first
KEY_MAX_CHARS = 200


@router.websocket(CODECK_WS_PATH)
async def codeck_ws(
    websocket: WebSocket, service: ProactiveDep, configuration: ConfigurationDep
) -> None:
    """codeck's dialect of the proactive agents' messages (``ws.ts``)."""
    workspace = str(await asyncio.to_thread(service.workspace.resolve))
    status: Message = {"type": "status", "data": {"workspace": workspace}}
    interval_s = configuration.settings.proactive.ws_heartbeat_s
    await stream_messages(
        websocket, service, interval_s, lambda _: status, lambda m: m["type"] in CODECK_TYPES
    )


@router.get("/api/auth/status", summary="codeck: is a login needed (always)")
async def auth_status(response: Response) -> AuthStatus:
    response.headers["Cache-Control"] = "no-store"
    return AuthStatus(ok=True, configured=True)


class LoginBody(Body):
    password: str = Field(
        min_length=1, max_length=KEY_MAX_CHARS, description="A ClayBot API key (cb_...)"
    )


class LoginRefused(ClayError):
    code = "unauthorized"
    status = 401


class FolderNotFound(NotFound):
    code = "folder_not_found"


class TooManyWrongKeys(ClayError):
    code = "rate_limited"
    status = 429


@router.post(
    "/api/auth/login",
    summary="codeck: log in with an API key (agents:read) as the password",
    responses=codeck_errors(*BODY_ERRORS, 401, 403, 429, 503),
)
async def auth_login(request: Request, keys: KeysDep, body: LoginBody) -> LoggedIn:
    presented = body.password.strip()
    try:
        checked = await check_key(
            keys,
            dashboard_auth_of(request).login_failures,
            client_address(request.scope),
            presented,
        )
    except StoreError as exc:
        raise Unavailable("API keys cannot be checked right now; retry shortly") from exc
    if checked.record is None:
        if checked.retry_after_s:
            raise TooManyWrongKeys(
                f"too many wrong keys from this address; retry in {checked.retry_after_s} s",
                retry_after_s=checked.retry_after_s,
            )
        raise LoginRefused("that API key is unknown or revoked")
    if not checked.record.allows(LOGIN_SCOPE):
        raise ClayError(
            f"this API key lacks the scope {LOGIN_SCOPE!r}", code="forbidden", status=403
        )
    return LoggedIn(ok=True, success=True, token=presented)


@router.get(
    "/api/files",
    summary="codeck: the folders of the workspace at a path (an agent's cwd picker)",
    responses=codeck_errors(404, 422),
)
async def folders(
    service: ProactiveDep,
    path: Annotated[
        str,
        Query(max_length=CWD_MAX_CHARS, description="Relative to the workspace; empty: its root"),
    ] = "",
) -> FolderList:
    try:
        where, names = await asyncio.to_thread(service.folders, path)
    except InvalidAgentInput as exc:
        # No folder an agent could work in is there (as codeck's own server says it: 404).
        raise FolderNotFound(exc.message, field="query.path") from exc
    items: list[dict[str, Any]] = [{"name": name, "isDirectory": True} for name in names]
    return FolderList.model_validate(
        {"ok": True, "success": True, "path": path, "absolutePath": where, "items": items}
    )
