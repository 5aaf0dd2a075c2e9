"""Permission requests: asked through a connector, decided once, delivered to the asker.

A request is appended to ``<home>/permissions/requests.jsonl`` (fsynced) before
anyone sees it, and so is its decision, before the asking agent is told. The
asking agent learns the decision through its durable inbox under the message id
``perm:<requestId>``, so a crash between "decided" and "delivered" re-posts the
same id at boot and the inbox drops the repeat: the grant reaches the agent
exactly once. Nobody answering is a decision too: after the timeout the request
is denied (fail closed), also when the engine was down at the time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from claybot.durable.atomic import append_durably
from claybot.durable.jsonl import encode_record, read_jsonl
from claybot.kernel.event_types import EventType
from claybot.kernel.event_types import PermissionRequest as PermissionRequestJson
from claybot.kernel.events import EventBus
from claybot.kernel.ids import new_id
from claybot.permissions.prompts import (
    PermissionAlreadyDecided,
    PermissionOutcome,
    PermissionPrompt,
    PermissionRequestNotFound,
)

log = logging.getLogger(__name__)

Status = Literal["pending", "granted", "denied"]
MAX_PENDING_PER_AGENT = 16
MAX_REASON_CHARS = 2000
TIMEOUT_DECIDER = "timeout"


@dataclass(frozen=True)
class PermissionRequest:
    id: str
    agent_id: str  # who asked; the decision goes to this agent
    agent_label: str
    permission: str  # a normalised tag
    reason: str
    connector: str  # the conversation the prompt is shown in
    user_id: str
    channel_id: str
    created_at: int
    expires_at: int
    status: Status = "pending"
    decided_by: str | None = None
    decided_at: int | None = None
    delivered: bool = False

    @property
    def approved(self) -> bool:
        return self.status == "granted"

    def prompt(self) -> PermissionPrompt:
        return PermissionPrompt(
            request_id=self.id,
            agent_id=self.agent_id,
            agent_label=self.agent_label,
            permission=self.permission,
            reason=self.reason,
            connector=self.connector,
            user_id=self.user_id,
            channel_id=self.channel_id,
            expires_at=self.expires_at,
        )

    def outcome(self) -> PermissionOutcome:
        return PermissionOutcome(self.id, self.approved, self.decided_by or "")

    def to_dict(self) -> PermissionRequestJson:
        """The request as the API lists it and its ``permission.*`` events carry it."""
        return {
            **self.prompt().to_dict(),
            "createdAt": self.created_at,
            "status": self.status,
            "decidedBy": self.decided_by,
            "decidedAt": self.decided_at,
            "delivered": self.delivered,
        }

    def decision_text(self) -> str:
        """What the asking agent is told; it resumes its work with this message."""
        if self.approved:
            return f"Permission granted: {self.permission}. Continue with the previous request."
        if self.decided_by == TIMEOUT_DECIDER:
            return (
                f"Permission request for {self.permission} got no answer in time and was "
                "denied. Continue without it, or ask again later if it is essential."
            )
        return f"Permission denied: {self.permission}. Continue without it."


@dataclass(frozen=True)
class Conversation:
    """Where a prompt is shown: a user agent's connector conversation."""

    connector: str
    user_id: str
    channel_id: str


Present = Callable[[PermissionRequest], Awaitable[None]]


class RequestLog:
    """The append-only, fsynced JSONL file behind the broker."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()

    def load(self) -> dict[str, PermissionRequest]:
        requests: dict[str, PermissionRequest] = {}
        for record in read_jsonl(self.path, repair=True).records:
            try:
                op, request_id = record["op"], str(record["id"])
                if op == "requested":
                    requests[request_id] = PermissionRequest(
                        id=request_id,
                        agent_id=str(record["agentId"]),
                        agent_label=str(record["agentLabel"]),
                        permission=str(record["permission"]),
                        reason=str(record["reason"]),
                        connector=str(record["connector"]),
                        user_id=str(record["userId"]),
                        channel_id=str(record["channelId"]),
                        created_at=int(record["createdAt"]),
                        expires_at=int(record["expiresAt"]),
                    )
                elif op == "decided" and request_id in requests:
                    requests[request_id] = replace(
                        requests[request_id],
                        status="granted" if record["approved"] else "denied",
                        decided_by=str(record["by"]),
                        decided_at=int(record["at"]),
                    )
                elif op == "delivered" and request_id in requests:
                    requests[request_id] = replace(requests[request_id], delivered=True)
            except (KeyError, TypeError, ValueError):
                log.error("skipping a malformed permission record", extra={"record": record})
        return requests

    async def append(self, record: dict[str, Any]) -> None:
        line = encode_record(record)
        async with self._lock:
            await asyncio.to_thread(self._append_sync, line)

    def _append_sync(self, line: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_durably(self.path, line)


class PermissionBroker:
    def __init__(
        self,
        path: Path,
        *,
        events: EventBus,
        now_ms: Callable[[], int],
        timeout_s: float,
        present: Present,
        withdraw: Present,
        deliver: Present,
    ) -> None:
        self._log = RequestLog(path)
        self._events = events
        self._now_ms = now_ms
        self.timeout_s = timeout_s
        self._present = present  # show the prompt in its conversation
        self._withdraw = withdraw  # the prompt was decided: update it
        self._deliver = deliver  # tell the asking agent (idempotent by request id)
        self._requests: dict[str, PermissionRequest] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._deciding: dict[str, asyncio.Lock] = {}

    # -- lifecycle --------------------------------------------------------------

    async def boot(self) -> None:
        """Re-arm timers, expire what ran out while the engine was down, finish deliveries."""
        self._requests = await asyncio.to_thread(self._log.load)
        for request in list(self._requests.values()):
            if request.status == "pending":
                self._arm(request)
            elif not request.delivered:
                await self._finish(request)

    async def shutdown(self) -> None:
        timers = list(self._timers.values())
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)
        self._timers.clear()

    # -- asking -------------------------------------------------------------------

    async def request(
        self,
        *,
        agent_id: str,
        agent_label: str,
        permission: str,
        reason: str,
        where: Conversation,
    ) -> PermissionRequest:
        """Record and present a request; an identical pending one is returned instead."""
        pending = [
            r for r in self._requests.values() if r.agent_id == agent_id and r.status == "pending"
        ]
        for existing in pending:
            if existing.permission == permission:
                return existing
        if len(pending) >= MAX_PENDING_PER_AGENT:
            raise ValueError(
                f"this agent already has {len(pending)} permission requests waiting; "
                "wait for an answer before asking again"
            )
        now = self._now_ms()
        request = PermissionRequest(
            id=new_id(),
            agent_id=agent_id,
            agent_label=agent_label,
            permission=permission,
            reason=reason[:MAX_REASON_CHARS],
            connector=where.connector,
            user_id=where.user_id,
            channel_id=where.channel_id,
            created_at=now,
            expires_at=now + int(self.timeout_s * 1000),
        )
        record = {"op": "requested", **_requested_fields(request)}
        await self._log.append(record)
        self._requests[request.id] = request
        self._arm(request)
        self._events.emit(EventType.PERMISSION_REQUESTED, request.to_dict())
        try:
            await self._present(request)
        except Exception:
            # The request stands (it is listed and can be decided by API or CLI).
            log.exception(
                "presenting a permission request failed",
                extra={"action": "permission.present_failed", "requestId": request.id},
            )
        return request

    # -- deciding -----------------------------------------------------------------

    def get(self, request_id: str) -> PermissionRequest:
        request = self._requests.get(request_id)
        if request is None:
            raise PermissionRequestNotFound(request_id)
        return request

    def list(self, status: Status | None = None) -> list[PermissionRequest]:
        requests = [r for r in self._requests.values() if status is None or r.status == status]
        return sorted(requests, key=lambda r: r.created_at, reverse=True)

    async def decide(
        self, request_id: str, approved: bool, by: str, *, connector: str | None = None
    ) -> PermissionRequest:
        """Decide once. ``connector`` limits a connector to the prompts it showed."""
        request = self.get(request_id)
        if connector is not None and request.connector != connector:
            raise PermissionRequestNotFound(request_id)
        lock = self._deciding.setdefault(request_id, asyncio.Lock())
        async with lock:
            request = self.get(request_id)
            if request.status != "pending":
                raise PermissionAlreadyDecided(request.outcome())
            now = self._now_ms()
            await self._log.append(
                {"op": "decided", "id": request_id, "approved": approved, "by": by, "at": now}
            )
            request = replace(
                request,
                status="granted" if approved else "denied",
                decided_by=by,
                decided_at=now,
            )
            self._requests[request_id] = request
        self._deciding.pop(request_id, None)
        timer = self._timers.pop(request_id, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
        self._events.emit(
            EventType.PERMISSION_GRANTED if approved else EventType.PERMISSION_DENIED,
            request.to_dict(),
        )
        await self._finish(request)
        try:
            await self._withdraw(request)
        except Exception:
            log.exception(
                "updating a decided permission prompt failed",
                extra={"action": "permission.withdraw_failed", "requestId": request_id},
            )
        return request

    async def _finish(self, request: PermissionRequest) -> None:
        try:
            await self._deliver(request)
        except Exception:
            # Left undelivered: the next boot delivers it (same inbox id, never twice).
            log.exception(
                "delivering a permission decision failed",
                extra={"action": "permission.deliver_failed", "requestId": request.id},
            )
            return
        await self._log.append({"op": "delivered", "id": request.id})
        self._requests[request.id] = replace(request, delivered=True)

    # -- timeouts -----------------------------------------------------------------

    def _arm(self, request: PermissionRequest) -> None:
        self._timers[request.id] = asyncio.create_task(
            self._expire_later(request), name=f"permission-timeout-{request.id}"
        )

    async def _expire_later(self, request: PermissionRequest) -> None:
        delay = max(0.0, (request.expires_at - self._now_ms()) / 1000)
        await asyncio.sleep(delay)
        self._timers.pop(request.id, None)
        with contextlib.suppress(PermissionAlreadyDecided):
            await self.decide(request.id, False, TIMEOUT_DECIDER)


def _requested_fields(request: PermissionRequest) -> dict[str, Any]:
    return {
        "id": request.id,
        "agentId": request.agent_id,
        "agentLabel": request.agent_label,
        "permission": request.permission,
        "reason": request.reason,
        "connector": request.connector,
        "userId": request.user_id,
        "channelId": request.channel_id,
        "createdAt": request.created_at,
        "expiresAt": request.expires_at,
    }
