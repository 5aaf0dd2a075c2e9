"""Which error shape a path answers in: one table for every place that answers errors.

The engine's own shape (``errors.py``) is the default. Clients written against
another API read that API's shape: seed 002's on ``/api/v1`` (``seed_errors.py``),
OpenAI's on the OpenAI-compatible door (``openai_errors.py``), codeck's on the paths
its web client calls (``codeck_errors.py``). The exception
handlers, the TCP listener's refusals and the body-size limit all ask here, so a
client gets the same shape whichever layer refused it.
"""

from __future__ import annotations

from claybot.api.codeck_errors import codeck_error, is_codeck_path
from claybot.api.openai_errors import is_openai_path, openai_error, openai_error_headers
from claybot.api.seed_errors import is_seed_path, seed_error


def reshaped(
    path: str, status: int, code: str, message: str, field: str | None
) -> tuple[int, bytes, dict[str, str]] | None:
    """(status, body, extra headers) of an error on ``path`` in its clients' shape; None
    where the engine's own shape is the answer."""
    if is_seed_path(path):
        return (*seed_error(status, code, message, field), {})
    if is_openai_path(path):
        status, body = openai_error(status, code, message, field)
        return status, body, openai_error_headers(status)
    if is_codeck_path(path):
        return status, codeck_error(code, message, field), {}
    return None
