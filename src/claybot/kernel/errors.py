"""The house error: a refusal that says what went wrong, to whom it is owed, and how to answer it.

Every layer raises ``ClayError`` (or one of the families below) for what a caller
asked and cannot have: an unknown id, a conflict with the current state, input the
engine refuses, a service that cannot answer right now. Each error carries

- ``code``: what went wrong, for programs (``task_not_found``); stable, clients match on it;
- ``message``: what went wrong, for people;
- ``field``: the one input to blame, as the caller spelled it (``taskId``,
  ``settings.timezone``), or None;
- ``status``: the HTTP status the API answers with, and ``retry_after_s`` when trying
  again later may work.

The API maps the whole family in one handler (``api/errors.py``), so no route
translates errors by hand and none matches on message text. A layer below the API
knows no HTTP: it picks the family that says what happened, and the status comes
with it. Subclasses set ``code`` (and, when they differ, ``status`` and
``retry_after_s``) as class attributes; one raise can override them.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

# Why a plugin's load failed (``claybot.plugin_api.errors`` raises them). Here, not there,
# so the API's answer models name it without importing the whole plugin API.
LoadFailureKind = Literal["not_ready", "auth_failed", "settings_invalid", "timeout", "error"]


class ErrorObject(TypedDict):
    """A ``ClayError`` as the API's ``error`` object (and a plugin failure's fields)."""

    code: str
    message: str
    field: NotRequired[str]  # only when one input is to blame


class ClayError(Exception):
    code: str = "bad_request"
    status: int = 400
    retry_after_s: int | None = None

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        code: str | None = None,
        status: int | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s

    def to_dict(self) -> ErrorObject:
        """The error as the API's ``error`` object: ``field`` only when one input is to blame."""
        body: ErrorObject = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class NotFound(ClayError):
    """Nothing has the id that was asked for."""

    code = "not_found"
    status = 404


class Conflict(ClayError):
    """The request is fine, but the current state refuses it (exists, already decided, full)."""

    code = "conflict"
    status = 409


class InvalidInput(ClayError):
    """The input is well-formed but the engine cannot use it (an unknown zone, a bad schedule)."""

    code = "invalid_request"
    status = 422


class Unavailable(ClayError):
    """The engine cannot answer right now (stopping, its database unreachable); retry later."""

    code = "unavailable"
    status = 503
