"""codeck's error shape on the paths its web client calls: ``{"error": "<message>"}``.

codeck's web client (seed 004's original) shows ``data.error`` as text in its forms
(``AgentsSection.tsx``, ``AuthView.tsx``): an object there renders as nothing, and
the person never learns why an agent was refused. So every error on these paths
says what went wrong as a string in ``error``, and keeps the engine's ``ok``,
``code`` and ``field`` beside it for ClayBot's own clients (``claybot proactive``
reads ``code`` and ``field``). The status codes stay the engine's: the client reads
none but 401 (which logs it out, as it should on an unknown or revoked key).
"""

from __future__ import annotations

import json
from typing import Any

# What codeck's web client calls: its proactive agents, its login, its folder picker.
CODECK_ROOTS = ("/api/agents", "/api/auth", "/api/files")


def is_codeck_path(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in CODECK_ROOTS)


def codeck_error(code: str, message: str, field: str | None) -> bytes:
    """The body of an error as codeck's client reads it."""
    body: dict[str, Any] = {"ok": False, "error": message, "code": code}
    if field:
        body["field"] = field
    return json.dumps(body).encode()
