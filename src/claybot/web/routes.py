"""The dashboard: logging in and out, the guard every page passes, and the Overview.

Pages are rendered on the server (Jinja2, autoescaped: text from agents, users and
plugins always shows as text) from the engine's own status, never a copy of its
logic. A page without a live session redirects to ``/login``; every POST carries
the session's CSRF token. Each answer forbids framing, inline scripts and
referrers (a login link's token must not leave in a ``Referer``).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Form, Header, Query, Request
from fastapi.responses import Response

from claybot.api.dashboard_auth import SESSION_TTL_S, DashboardAuth, Session
from claybot.api.deps import (
    AgentsDep,
    DashboardAuthDep,
    EventsDep,
    JobsHostDep,
    KeysDep,
    StatusDep,
    dashboard_auth_of,
    services_of,
)
from claybot.api.key_check import check_key, client_address
from claybot.api.sse import SSE_PING_S, EventStream, resume_after
from claybot.db.errors import StoreError
from claybot.engine.keystore import DeferredApiKeyStore
from claybot.kernel.errors import ClayError
from claybot.kernel.event_types import EventType
from claybot.web.rendering import page, see_other, to_login

SESSION_COOKIE = "claybot_session"
LOGIN_COOKIE = "claybot_login"  # the key form's CSRF token, before there is a session
LOGIN_FORM_TTL_S = 15 * 60
# The Overview's recent errors: looked for among the bus's newest events.
ERROR_EVENTS = frozenset(
    {
        EventType.AGENT_ERROR,
        EventType.AGENT_DAMAGED,
        EventType.AGENT_STORAGE_FAILED,
        EventType.SUBAGENT_FAILED,
        EventType.CRON_TASK_INVALID,
    }
)
RECENT_SCANNED = 2_000
ERRORS_SHOWN = 10
JOB_COUNTS_WAIT_S = 0.5
pages = APIRouter(include_in_schema=False)
log = logging.getLogger(__name__)


# -- pages ---------------------------------------------------------------------------------


def session_of(request: Request) -> Session | None:
    return dashboard_auth_of(request).session(request.cookies.get(SESSION_COOKIE))


async def guard(request: Request, scope: str = "admin") -> Session | Response:
    """The live session allowed ``scope``, or the answer instead: to login without a
    session (or once its key is revoked), a 403 page when its scopes do not reach."""
    session = session_of(request)
    if session is None:
        return to_login()
    if session.key_id is not None:
        # Every page calls this first, so it finds its services itself (by type).
        record = await services_of(request).get(DeferredApiKeyStore).get(session.key_id)
        if record is None or record.revoked:
            dashboard_auth_of(request).revoke(session.id)
            return to_login()
    if not session.allows(scope):
        return page(request, "forbidden.html", status_code=403, session=session, scope=scope)
    return session


async def guard_form(
    request: Request, csrf: str | None, scope: str = "admin"
) -> Session | Response:
    """``guard`` for a POST, which must also bring the session's CSRF token (403 without)."""
    session = await guard(request, scope)
    if isinstance(session, Response):
        return session
    if not DashboardAuth.csrf_ok(session, csrf):
        return page(request, "refused.html", status_code=403, session=session)
    return session


def set_session_cookie(request: Request, response: Response, cookie: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=SESSION_TTL_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


@pages.get("/login")
async def login(
    request: Request,
    auth: DashboardAuthDep,
    token: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    if token is None:
        return _login_form(request)
    redeemed = auth.redeem(token)
    if redeemed is None:
        return page(request, "login.html", status_code=403, refused=True)
    cookie, _ = redeemed
    response = see_other("/")
    set_session_cookie(request, response, cookie)
    return response


def _login_form(
    request: Request, status_code: int = 200, problem: str = "", retry_after_s: int = 0
) -> Response:
    """The login page; its key form's CSRF token is also set as a cookie (a session has
    no token to give yet), and the POST must bring both, equal."""
    token = secrets.token_urlsafe(32)
    response = page(
        request, "login.html", status_code=status_code, refused=False, csrf=token, problem=problem
    )
    if retry_after_s:
        response.headers["Retry-After"] = str(retry_after_s)
    response.set_cookie(
        LOGIN_COOKIE, token, max_age=LOGIN_FORM_TTL_S, path="/login", httponly=True,
        samesite="strict", secure=request.url.scheme == "https",
    )  # fmt: skip
    return response


@pages.post("/login")
async def login_with_key(
    request: Request,
    auth: DashboardAuthDep,
    keys: KeysDep,
    key: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """A session with an API key's scopes, for as long as the key lives. Wrong keys are
    limited per client address as on the API; a valid key always gets in."""
    cookie_token = request.cookies.get(LOGIN_COOKIE)
    if not csrf or not cookie_token or not hmac.compare_digest(csrf, cookie_token):
        return page(request, "refused.html", status_code=403, session=None)
    presented = key.strip()
    if not presented:
        return _login_form(request, 401, "That key is unknown or revoked.")
    client = client_address(request.scope)
    try:
        checked = await check_key(keys, auth.login_failures, client, presented)
    except StoreError as exc:
        log.error("cannot check an API key: %s", exc, extra={"action": "keys.verify_failed"})
        problem = "API keys cannot be checked right now; try again shortly."
        return _login_form(request, 503, problem, retry_after_s=exc.retry_after_s or 5)
    record = checked.record
    if record is None:
        wait_s = checked.retry_after_s
        if wait_s:
            problem = f"Too many wrong keys from this address: try again in {wait_s} s."
            return _login_form(request, 429, problem, retry_after_s=wait_s)
        return _login_form(request, 401, "That key is unknown or revoked.")
    started = auth.start_with_key(record.prefix, tuple(record.scopes), record.id)
    if started is None:
        problem = (
            "The dashboard has all the key sessions it keeps: log out of one, or log in "
            "with a link from `claybot dashboard`."
        )
        return _login_form(request, 503, problem)
    cookie, session = started
    # Where its scopes reach: the Overview needs admin; a jobs key starts at its jobs.
    landing = "/jobs" if not session.allows("admin") and session.allows("jobs:read") else "/"
    response = see_other(landing)
    set_session_cookie(request, response, cookie)
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@pages.post("/logout")
async def logout(
    request: Request,
    auth: DashboardAuthDep,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = session_of(request)
    if session is None:
        return to_login()
    if not DashboardAuth.csrf_ok(session, csrf):
        return page(request, "refused.html", status_code=403, session=session)
    auth.revoke(session.id)
    response = to_login()
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@pages.get("/")
async def overview(
    request: Request,
    status: StatusDep,
    agents: AgentsDep,
    jobs: JobsHostDep,
    events: EventsDep,
) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    report = status.status()
    started = datetime.fromisoformat(report["startedAt"].replace("Z", "+00:00"))
    running, queued = agents.listings.turn_counts()
    counts = await jobs.counts_by_status(JOB_COUNTS_WAIT_S)
    errors = events.newest_of(ERROR_EVENTS, RECENT_SCANNED, ERRORS_SHOWN)
    return page(
        request,
        "overview.html",
        session=session,
        status=report,
        uptime=_duration((datetime.now(UTC) - started).total_seconds()),
        kinds=agents.listings.counts_by_kind(),
        running=running,
        queued=queued,
        jobs=counts.jobs,
        workers=counts.workers,
        jobs_problem=counts.problem,
        errors=[event.to_dict() for event in errors],
        after=events.last_id,
        rendered_at=time.strftime("%H:%M:%S UTC", time.gmtime()),
    )


@pages.get("/activity")
async def activity(
    request: Request,
    events: EventsDep,
    after: Annotated[int | None, Query(ge=0)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    """Every engine event (SSE), for the Overview's live feed; a reconnect resumes after
    the last one seen."""
    session = await guard(request)
    if isinstance(session, Response):
        return session
    try:
        resume = resume_after(last_event_id, after)
    except ClayError as exc:
        return Response(str(exc), status_code=400, media_type="text/plain")
    subscription = events.subscribe(resume)
    init = {"id": events.last_id, "type": "init", "payload": {"gap": subscription.gap}}
    return EventStream(init, subscription, ping_s=SSE_PING_S)


def _duration(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"
