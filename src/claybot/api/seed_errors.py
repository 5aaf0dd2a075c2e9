"""Seed 002's error shape on ``/api/v1``: ``{"error": "<message>", "code": "<CODE>"}``.

A client written against seed 002 reads ``error`` as a string and matches on its
codes (VALIDATION_ERROR, NOT_FOUND, INVALID_STATE, FILE_TOO_LARGE, DUPLICATE,
INTERNAL_ERROR), and the seed answers a body that does not validate with 400.
Every other path keeps the engine's own shape. The engine's ``field`` rides along
(a client of the seed ignores it).
"""

from __future__ import annotations

import json
from typing import Any

SEED_PREFIX = "/api/v1"

# The engine's code, or its HTTP status, as seed 002 names it.
_BY_STATUS = {
    400: "VALIDATION_ERROR",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "DUPLICATE",
    413: "FILE_TOO_LARGE",
    422: "VALIDATION_ERROR",
    429: "RATE_LIMITED",
    503: "UNAVAILABLE",
    507: "UNAVAILABLE",
}


def is_seed_path(path: str) -> bool:
    return path == SEED_PREFIX or path.startswith(SEED_PREFIX + "/")


def seed_error(status: int, code: str, message: str, field: str | None) -> tuple[int, bytes]:
    """(status, body) of an error as seed 002 answers it."""
    # An upper-case code is already one of the seed's (INVALID_STATE, FILE_TOO_LARGE).
    seed_code = code if code.isupper() else _BY_STATUS.get(status, "INTERNAL_ERROR")
    if status == 422:
        status = 400  # the seed answers what does not validate with 400
    body: dict[str, Any] = {"error": message, "code": seed_code}
    if field:
        body["field"] = field
    return status, json.dumps(body).encode()
