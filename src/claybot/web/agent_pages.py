"""The dashboard's Agents pages: the table of agents, and an agent's page: its history
as cards, its subagents as a tree, its grants (each can be taken back), and reset."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import Response

from claybot.agents.descriptors import SubagentDescriptor
from claybot.agents.system import AgentNotFound
from claybot.api.deps import AgentsDep
from claybot.permissions.tags import PermissionTagError, granted_tags
from claybot.web.rendering import page, see_other
from claybot.web.routes import guard, guard_form

router = APIRouter(include_in_schema=False)
AGENTS_PER_PAGE = 50
RECORDS_PER_PAGE = 50
SUBAGENTS_SHOWN = 200
REVOKE_WAIT_S = 2.0
KINDS = ("user", "subagent", "cron", "heartbeat")


@router.get("/agents")
async def agents(
    request: Request,
    system: AgentsDep,
    kind: Annotated[str | None, Query(max_length=20)] = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    page_number: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    chosen_kind = kind if kind in KINDS else None
    first = (page_number - 1) * AGENTS_PER_PAGE
    listed, total = system.listings.page(
        kind=chosen_kind, text=q, offset=first, limit=AGENTS_PER_PAGE
    )
    return page(
        request,
        "agents.html",
        session=session,
        agents=listed,
        total=total,
        page_number=page_number,
        pages=max(1, -(-total // AGENTS_PER_PAGE)),
        kind=chosen_kind,
        kinds=KINDS,
        q=q or "",
    )


@router.get("/agents/{agent_id}")
async def agent(
    request: Request,
    system: AgentsDep,
    agent_id: str,
    before: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    try:
        history = await system.histories.page(
            agent_id, after=None, before=before, limit=RECORDS_PER_PAGE
        )
    except AgentNotFound:
        return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
    listing = system.listings.agent(agent_id)
    records: list[dict[str, Any]] = history.records
    tree, subagents = system.directory.subagent_tree(agent_id, SUBAGENTS_SHOWN)
    descriptor = system.descriptor_of(agent_id)
    return page(
        request,
        "agent.html",
        session=session,
        agent=listing,
        agent_id=agent_id,
        parent_id=descriptor.parentAgentId if isinstance(descriptor, SubagentDescriptor) else None,
        tree=tree,
        subagents=subagents,
        tree_limit=SUBAGENTS_SHOWN,
        grants=granted_tags(await system.permissions_of(agent_id)),
        records=records,
        total=history.total,
        older=records[0]["seq"] if records and records[0]["seq"] > 0 else None,
        newest=before is None,
    )


@router.post("/agents/{agent_id}/reset")
async def reset(
    request: Request,
    system: AgentsDep,
    agent_id: str,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        await system.reset(agent_id)
    except AgentNotFound:
        return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
    return see_other(f"/agents/{agent_id}")


@router.post("/agents/{agent_id}/revoke")
async def revoke(
    request: Request,
    system: AgentsDep,
    agent_id: str,
    permission: Annotated[str, Form(max_length=5000)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    """Take a grant back; the agent applies it before its next turn, in inbox order."""
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        turn = await system.revoke_grant(agent_id, permission)
    except AgentNotFound:
        return page(request, "not_found.html", status_code=404, session=session, what=agent_id)
    except PermissionTagError as exc:
        return page(request, "problem.html", status_code=422, session=session,
                    message=str(exc), back=f"/agents/{agent_id}")  # fmt: skip
    # Shown at once when the agent is idle; behind a running turn it is applied after it.
    with contextlib.suppress(TimeoutError):
        await turn.outcome(REVOKE_WAIT_S)
    return see_other(f"/agents/{agent_id}")
