"""OpenAI's error shape on the OpenAI-compatible door (``/v1/chat/completions``, ``/v1/models``).

An OpenAI client (the official SDKs, editor plugins, chat UIs) reads an error as
``{"error": {"message", "type", "param", "code"}}`` and picks its exception by the
HTTP status, so every error on these paths is answered that way: the engine's own
errors, the framework's (a body that is not JSON, one that does not validate, an
unknown path), and the TCP listener's (no key, a missing scope, too many requests).
OpenAI answers a body that does not validate with 400, not 422. Every other path
keeps the engine's shape (``errors.py``), and ``/api/v1`` seed 002's
(``seed_errors.py``).
"""

from __future__ import annotations

import json
from typing import Any

OPENAI_ROOT = "/v1/"
ENGINE_ROOT = "/v1/engine"

# OpenAI's ``type`` for each status; its SDKs choose the exception by status alone.
_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
}
# A 500 (a bug) or 504 (the reply took too long) may come after the message was
# accepted: an SDK that retried by itself would post it again, so it is told not to
# (the OpenAI SDKs read ``x-should-retry``). A 503 or 507 accepted nothing: retrying
# is right.
NO_RETRY_STATUSES = frozenset({500, 504})


def is_openai_path(path: str) -> bool:
    """``/v1/...`` but the engine's own ``/v1/engine``: what an OpenAI client calls."""
    if not path.startswith(OPENAI_ROOT):
        return False
    return not (path == ENGINE_ROOT or path.startswith(ENGINE_ROOT + "/"))


def error_type(status: int) -> str:
    if status in _TYPES:
        return _TYPES[status]
    return "server_error" if status >= 500 else "invalid_request_error"


def openai_error(status: int, code: str, message: str, field: str | None) -> tuple[int, bytes]:
    """(status, body) of an error as OpenAI answers it. ``param`` is the body's field
    as the client spelled it (``messages``, not ``body.messages``)."""
    if status == 422:
        status = 400
    # ``body`` alone blames the whole body (not an object, say): no one field.
    param = field.removeprefix("body.") if field and field != "body" else None
    body: dict[str, Any] = {
        "error": {"message": message, "type": error_type(status), "param": param, "code": code}
    }
    return status, json.dumps(body).encode()


def openai_error_headers(status: int) -> dict[str, str]:
    """Headers an OpenAI client reads on an error besides the body."""
    return {"x-should-retry": "false"} if status in NO_RETRY_STATUSES else {}
