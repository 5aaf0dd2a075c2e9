"""Permission requests: list them, decide them (also what ``claybot permissions`` uses)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from claybot.api.deps import PermissionsDep
from claybot.api.responses import BODY_ERRORS, errors
from claybot.wire.base import AnswerRoute
from claybot.wire.bodies import DecidePermission
from claybot.wire.permissions import PermissionDecided, PermissionRequestList

router = APIRouter(prefix="/v1/engine", route_class=AnswerRoute)


@router.get(
    "/permissions",
    summary="Permission requests: pending ones and past decisions",
    responses=errors(422),
)
async def list_permissions(
    permissions: PermissionsDep,
    status: Annotated[Literal["pending", "granted", "denied"] | None, Query()] = None,
) -> PermissionRequestList:
    requests = [item.to_dict() for item in permissions.list(status)]
    return PermissionRequestList.model_validate({"ok": True, "requests": requests})


@router.post(
    "/permissions/{requestId}",
    summary="Allow or deny a pending permission request",
    responses=errors(*BODY_ERRORS, 404, 409),
)
async def decide_permission(
    permissions: PermissionsDep, requestId: str, body: DecidePermission
) -> PermissionDecided:
    decided = await permissions.decide(requestId, body.decision == "allow", body.by)
    return PermissionDecided.model_validate({"ok": True, "request": decided.to_dict()})
