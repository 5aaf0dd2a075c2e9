"""The dashboard's Permissions page: pending requests with Allow and Deny, and decisions."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from claybot.api.deps import PermissionsDep
from claybot.kernel.errors import ClayError
from claybot.web.rendering import done, page
from claybot.web.routes import guard, guard_form

router = APIRouter(include_in_schema=False)
DECISIONS_SHOWN = 50
DECIDER = "dashboard"  # ``decidedBy`` of a decision made here


@router.get("/permissions")
async def permissions(request: Request, desk: PermissionsDep) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    pending = [item.to_dict() for item in desk.list("pending")]
    decided = [item.to_dict() for item in desk.list(None) if item.status != "pending"]
    decided.sort(key=lambda item: item["decidedAt"] or 0, reverse=True)
    return page(
        request,
        "permissions.html",
        session=session,
        pending=pending,
        decided=decided[:DECISIONS_SHOWN],
    )


@router.post("/permissions/{request_id}")
async def decide(
    request: Request,
    desk: PermissionsDep,
    request_id: str,
    decision: Annotated[Literal["allow", "deny"], Form()],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
    back: Annotated[str, Form(max_length=1000)] = "/permissions",
) -> Response:
    """Allow or deny; then back where it was decided (this page, or a chat)."""
    if not back.startswith(("/permissions", "/chat/")):
        back = "/permissions"  # never a redirect off the dashboard
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        await desk.decide(request_id, decision == "allow", DECIDER)
    except ClayError as exc:  # unknown, or decided already (by someone else, or in time)
        return page(request, "problem.html", status_code=exc.status, session=session,
                    message=str(exc), back=back)  # fmt: skip
    return done(request, back)
