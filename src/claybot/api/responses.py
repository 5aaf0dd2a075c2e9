"""The error body as a model, and the ``responses=`` table each route declares with it.

Every error the API answers (see ``errors.py``) is ``{"ok": false, "error": {...}}``;
declaring it per status makes the OpenAPI document list what a route really answers,
so a client generated from it knows the shape of a 404 as well as of a 200.

The tables refer to the error models by name (``$ref``) rather than handing FastAPI
the model: for a ``model`` FastAPI builds a validator per route and status at import,
about 200 of them, a tenth of the API's import time. The models are put among the
document's components once, by ``openapi.refine`` (``ERROR_MODELS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from claybot.wire.base import drop_null_default
from claybot.wire.openai import OpenAIError

SCHEMAS_REF = "#/components/schemas/"


class ErrorDetail(BaseModel):
    code: str = Field(description="What went wrong, for programs: `agent_not_found`, …")
    message: str = Field(description="What went wrong, for people")
    # Left out, never null, when no single input is to blame.
    field: str | SkipJsonSchema[None] = Field(
        default=None,
        description="The input to blame: `body.<name>`, `query.<name>`, or a path parameter",
        json_schema_extra=drop_null_default,
    )


class ErrorBody(BaseModel):
    ok: Literal[False]
    error: ErrorDetail


DESCRIPTIONS: dict[int, str] = {
    400: "Bad request: the body is not JSON (`malformed_json`), or the engine refuses it "
    "as asked (the code says why)",
    404: "Not found: nothing has the id in the path (or the query)",
    409: "Conflict with the current state (the code says which)",
    413: "Too large: the body is over 1 MiB, or the message text over the engine's limit "
    "(`too_large`)",
    422: "Invalid input (`invalid_request`); `field` names it",
    500: "Internal error; the engine log has the details, the answer does not",
    502: "A plugin failed to load (`plugin_load_failed`)",
    503: "Unavailable for now: the engine is stopping, its database cannot be reached, or an "
    "I/O operation failed (`io_error`); retry after `Retry-After` seconds",
    507: "The disk holding the engine's home is full (`disk_full`): nothing was accepted or "
    "changed; free space there and retry after `Retry-After` seconds",
}
# What a route that writes to the home can answer whatever it does: a full disk, or a
# failed write (the error handlers map OSError to these).
WRITE_ERRORS = (503, 507)

RETRY_AFTER: dict[str, Any] = {
    "Retry-After": {
        "description": "Seconds to wait before retrying",
        "schema": {"type": "integer", "minimum": 0},
    }
}

# What every route with a JSON body can answer before the route itself runs.
BODY_ERRORS = (400, 413, 422)


@dataclass(frozen=True)
class ErrorTable:
    """One door's errors: ``errors(404, 409)`` is the ``responses=`` of a route there,
    each status with the door's error body, what it means, and ``Retry-After`` where
    trying again later may work.

    The content is spelled out as JSON, so a route that answers text/plain (whose
    ``model`` FastAPI would file under the route's media type) declares its errors
    the same way.
    """

    descriptions: dict[int, str]
    model: type[BaseModel]
    retry_statuses: frozenset[int] = frozenset(WRITE_ERRORS)  # answered with Retry-After

    def __call__(self, *statuses: int) -> dict[int | str, dict[str, Any]]:
        """The table, in FastAPI's own type for ``responses=`` (OpenAPI response
        objects by status): routes add their own entries to it, so a dict it is."""
        schema = {"$ref": f"{SCHEMAS_REF}{self.model.__name__}"}
        body = {"application/json": {"schema": schema}}
        table: dict[int | str, dict[str, Any]] = {}
        for status in sorted(set(statuses)):
            response: dict[str, Any] = {"description": self.descriptions[status], "content": body}
            if status in self.retry_statuses:
                response["headers"] = RETRY_AFTER
            table[status] = response
        return table


# The engine's own errors (``errors.py``).
errors = ErrorTable(DESCRIPTIONS, ErrorBody)


class SeedError(BaseModel):
    """Seed 002's error body, on ``/api/v1`` (see ``seed_errors.py``)."""

    error: str = Field(description="What went wrong, for people")
    code: str = Field(
        description="VALIDATION_ERROR, NOT_FOUND, INVALID_STATE, FILE_TOO_LARGE, DUPLICATE, "
        "UNAUTHORIZED, FORBIDDEN, RATE_LIMITED, UNAVAILABLE or INTERNAL_ERROR"
    )
    field: str | SkipJsonSchema[None] = Field(
        default=None, description="The input to blame", json_schema_extra=drop_null_default
    )


SEED_DESCRIPTIONS: dict[int, str] = {
    400: "VALIDATION_ERROR (the body or a parameter; `field` names it) or INVALID_STATE "
    "(the job's status does not allow it)",
    404: "NOT_FOUND: no such job (or not yours), artifact or upload",
    409: "DUPLICATE",
    502: "MCP_UNAVAILABLE: the MCP server could not be started or reached",
    413: "FILE_TOO_LARGE: an upload or a body over its cap",
    500: "INTERNAL_ERROR; the engine log has the details",
    503: "UNAVAILABLE: the database cannot be reached; retry after `Retry-After` seconds",
    507: "UNAVAILABLE: the disk holding the engine's home is full",
}


# Seed 002's routes: their errors in the seed's shape.
seed_errors = ErrorTable(SEED_DESCRIPTIONS, SeedError)


OPENAI_DESCRIPTIONS: dict[int, str] = {
    400: "invalid_request_error: the body is not JSON (`malformed_json`), does not "
    "validate (`invalid_request`; `param` names the field), has no user message to say "
    "(`no_user_message`) or content other than text and data-URL images "
    "(`unsupported_content`)",
    404: "model_not_found: no such model, or not one of yours",
    413: "too_large: the body, or the new messages' text, is over its limit; "
    "`file_too_large`, `file_quota_exceeded`: an image is over a file store limit",
    500: "server_error; the engine log has the details (`x-should-retry: false`)",
    503: "server_error: the engine is stopping, or an I/O operation failed; nothing was "
    "accepted; retry after `Retry-After` seconds",
    504: "reply_timeout: the agent did not answer within `chat.replyTimeoutS`; it goes on, "
    "and resending the conversation unchanged gets its reply (`x-should-retry: false`)",
    507: "server_error (`disk_full`): nothing was accepted; retry after `Retry-After` seconds",
}


# The OpenAI-compatible door: its errors in OpenAI's shape.
openai_errors = ErrorTable(OPENAI_DESCRIPTIONS, OpenAIError)


class CodeckError(BaseModel):
    """codeck's error body, on the paths its web client calls (see ``codeck_errors.py``)."""

    ok: Literal[False]
    error: str = Field(description="What went wrong, for people (codeck's client shows it)")
    code: str = Field(description="What went wrong, for programs: `agent_not_found`, …")
    field: str | SkipJsonSchema[None] = Field(
        default=None, description="The input to blame", json_schema_extra=drop_null_default
    )


CODECK_DESCRIPTIONS: dict[int, str] = {
    **DESCRIPTIONS,
    401: "Unauthorized: the API key is unknown or revoked (codeck's client logs out)",
    403: "Forbidden: the API key lacks the scope the route needs",
    429: "Too many wrong keys from this address; retry after `Retry-After` seconds",
}


# The routes codeck's web client calls: its error shape.
codeck_errors = ErrorTable(CODECK_DESCRIPTIONS, CodeckError, frozenset({429, *WRITE_ERRORS}))


# The models the tables above name: ``openapi.refine`` adds them to the components.
ERROR_MODELS: tuple[type[BaseModel], ...] = (ErrorBody, SeedError, OpenAIError, CodeckError)
