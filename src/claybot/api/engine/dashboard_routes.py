"""The dashboard's socket routes: one-time login links and the live sessions (on TCP
they need the admin scope). Kept apart from the pages, which are imported the first
time one is asked for (``install.py``); these are part of the API at boot."""

from __future__ import annotations

from fastapi import APIRouter

from claybot.api.deps import AddressDep, DashboardAuthDep
from claybot.api.responses import errors
from claybot.kernel.errors import NotFound
from claybot.wire.base import AnswerRoute, Ok
from claybot.wire.dashboard import DashboardLink, DashboardSessions

control = APIRouter(prefix="/v1/engine/dashboard", route_class=AnswerRoute)


@control.post(
    "/links",
    summary="A one-time dashboard login link (5 minutes, one use)",
    status_code=201,
    responses=errors(503),
)
async def new_link(auth: DashboardAuthDep, address: AddressDep) -> DashboardLink:
    token, ttl_s = auth.new_link_token()
    url = address.url(f"/login?token={token}")
    return DashboardLink.model_validate({"ok": True, "url": url, "expiresInS": ttl_s})


@control.get("/sessions", summary="Live dashboard sessions, oldest first")
async def list_sessions(auth: DashboardAuthDep) -> DashboardSessions:
    listed = [session.to_dict(auth.wall) for session in auth.sessions()]
    return DashboardSessions.model_validate({"ok": True, "sessions": listed})


@control.delete("/sessions/{sessionId}", summary="End a dashboard session", responses=errors(404))
async def revoke_session(auth: DashboardAuthDep, sessionId: str) -> Ok:
    if not auth.revoke(sessionId):
        raise NotFound(f"no dashboard session {sessionId!r}", field="sessionId")
    return Ok(ok=True)
