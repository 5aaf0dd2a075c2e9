"""The dashboard's socket routes: one-time login links and the live sessions (on TCP
they need the admin scope). Kept apart from the pages, which are imported the first
time one is asked for (``install.py``); these are part of the API at boot."""

from __future__ import annotations

from fastapi import APIRouter, Request

from claybot.api.dashboard_auth import DashboardAuth
from claybot.api.engine.routes import engine_of
from claybot.api.responses import errors
from claybot.kernel.errors import NotFound
from claybot.wire.base import AnswerRoute, Ok
from claybot.wire.dashboard import DashboardLink, DashboardSessions

control = APIRouter(prefix="/v1/engine/dashboard", route_class=AnswerRoute)


def auth_of(request: Request) -> DashboardAuth:
    auth = request.app.state.dashboard_auth
    assert isinstance(auth, DashboardAuth)
    return auth


@control.post(
    "/links",
    summary="A one-time dashboard login link (5 minutes, one use)",
    status_code=201,
    responses=errors(503),
)
async def new_link(request: Request) -> DashboardLink:
    engine = engine_of(request)
    token, ttl_s = auth_of(request).new_link_token()
    host = engine.settings.engine.host
    if host in ("0.0.0.0", "::"):  # listening everywhere: this machine's own address works
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{engine.tcp_port}/login?token={token}"
    return DashboardLink.model_validate({"ok": True, "url": url, "expiresInS": ttl_s})


@control.get("/sessions", summary="Live dashboard sessions, oldest first")
async def list_sessions(request: Request) -> DashboardSessions:
    auth = auth_of(request)
    listed = [session.to_dict(auth.wall) for session in auth.sessions()]
    return DashboardSessions.model_validate({"ok": True, "sessions": listed})


@control.delete("/sessions/{sessionId}", summary="End a dashboard session", responses=errors(404))
async def revoke_session(request: Request, sessionId: str) -> Ok:
    if not auth_of(request).revoke(sessionId):
        raise NotFound(f"no dashboard session {sessionId!r}", field="sessionId")
    return Ok(ok=True)
