"""Permission prompts inside ``claybot chat``.

Requests shown in this conversation (its own agent's, and background agents'
routed here) print as they arrive, numbered; ``/allow [n]`` and ``/deny [n]``
answer them (the newest pending one without a number). The chat client, not the
engine, interprets these slash commands.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.markup import escape

from claybot.cli.common import console
from claybot.permissions.prompts import asker_in_conversation

if TYPE_CHECKING:
    from claybot.wire.events import EventFrame
    from claybot.wire.permissions import PermissionRequest


def _print(markup: str) -> None:
    console.print(markup, highlight=False, soft_wrap=True)


PERMISSION_EVENTS = frozenset({"permission.requested", "permission.granted", "permission.denied"})


class ChatApprovals:
    def __init__(self, user: str, channel: str, say: Callable[[str], None] = _print) -> None:
        self.user = user
        self.channel = channel
        self._say = say  # prints a line of rich markup (the chat's screen)
        self._lock = threading.Lock()
        self._numbers: dict[str, int] = {}  # request id -> the number shown
        self._pending: dict[int, PermissionRequest] = {}  # number -> request, while pending

    def is_ours(self, request: PermissionRequest) -> bool:
        return (
            request.connector == "local"
            and request.userId == self.user
            and request.channelId == self.channel
        )

    def on_event(self, event: EventFrame) -> None:
        kind = event.type
        if kind not in PERMISSION_EVENTS:
            return
        # The events' payload is the API's request (kernel/event_types.py's PermissionRequest).
        from claybot.wire.permissions import PermissionRequest

        request = PermissionRequest.model_validate(event.payload)
        if not self.is_ours(request):
            return
        if kind == "permission.requested":
            self.show(request)
        else:
            self._decided(request)

    def show(self, request: PermissionRequest) -> None:
        request_id = request.requestId
        with self._lock:
            if request_id in self._numbers:
                return
            number = self._numbers[request_id] = len(self._numbers) + 1
            self._pending[number] = request
        self._say(
            f"[bold yellow]permission #{number}>[/bold yellow] {escape(_asker(request))} "
            f"asks for [bold]{escape(request.permission)}[/bold]: {escape(request.reason)}\n"
            f"  answer with /allow {number} or /deny {number}"
        )

    def _decided(self, request: PermissionRequest) -> None:
        with self._lock:
            number = self._numbers.get(request.requestId)
            if number is None or self._pending.pop(number, None) is None:
                return
        verdict = "allowed" if request.status == "granted" else "denied"
        by = request.decidedBy or ""
        reason = " (no answer in time)" if by == "timeout" else ""
        self._say(f"[dim]permission #{number} {verdict}{reason}[/dim]")

    def pick(self, token: str | None) -> PermissionRequest:
        """The pending request ``token`` names (a number), or the newest one."""
        with self._lock:
            if not self._pending:
                raise ValueError("no permission request is waiting for an answer")
            if token is None:
                return self._pending[max(self._pending)]
            try:
                return self._pending[int(token.lstrip("#"))]
            except (ValueError, KeyError):
                waiting = ", ".join(f"#{n}" for n in sorted(self._pending))
                raise ValueError(f"no pending request {token}; waiting: {waiting}") from None


def _asker(request: PermissionRequest) -> str:
    return asker_in_conversation(
        request.agentLabel, request.connector, request.userId, request.channelId
    )
