"""The Allow/Deny buttons of a permission prompt: callback data and verdicts (pure).

A button carries ``perm:allow:<request id>`` or ``perm:deny:<request id>``;
Telegram allows at most 64 bytes of callback data.
"""

from __future__ import annotations

from claybot.plugin_api import PermissionOutcome

CALLBACK_PREFIX = "perm"
CALLBACK_DATA_MAX_BYTES = 64


def callback_data(approved: bool, request_id: str) -> str:
    return f"{CALLBACK_PREFIX}:{'allow' if approved else 'deny'}:{request_id}"


def parse_callback(data: str) -> tuple[bool, str] | None:
    parts = data.split(":", 2)
    if len(parts) != 3 or parts[0] != CALLBACK_PREFIX or parts[1] not in ("allow", "deny"):
        return None
    return parts[1] == "allow", parts[2]


def verdict_text(outcome: PermissionOutcome) -> str:
    if outcome.approved:
        return "✅ Allowed"
    if outcome.decided_by == "timeout":
        return "⌛ Expired (no answer in time): denied"
    return "❌ Denied"
