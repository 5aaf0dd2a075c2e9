"""One error shape for every endpoint: ``{"ok": false, "error": {"code", "message", "field"?}}``.

What the engine refuses is a house error (``ClayError``, raised by whichever layer
refuses) and is answered by one handler here; the rest are what the framework
raises (an unknown path, a body that does not validate) and what the machine does
(a full disk, a bug).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.routing import Match

from claybot.api.error_shapes import reshaped
from claybot.config.home import HomePaths
from claybot.durable.group_commit import is_disk_full
from claybot.kernel.errors import ClayError

log = logging.getLogger(__name__)


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if field:
        body["field"] = field
    return JSONResponse({"ok": False, "error": body}, status_code=status, headers=headers)


def _field_path(location: Sequence[Any]) -> str:
    return ".".join(str(part) for part in location)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return error_response(
            400, "malformed_json", f"request body is not valid JSON: {first['msg']}"
        )
    field = _field_path(first.get("loc", ()))
    message = "; ".join(f"{_field_path(e.get('loc', ()))}: {_readable(e)}" for e in errors)
    return error_response(422, "invalid_request", message, field or None)


def _readable(error: Any) -> str:
    """pydantic's message without its internals: a validator's ValueError comes as
    "Value error, <what it said>"."""
    text = str(error.get("msg", "invalid"))
    return text.removeprefix("Value error, ").removeprefix("Assertion failed, ")


# Methods an ``Allow`` header can list; TRACE and CONNECT are never served.
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this request's path.

    Starlette's 405 names only the methods of the first route matching the path, and
    FastAPI declares one route per method, so ``/v1/engine/providers`` would answer a
    PUT with ``Allow: GET`` although POST works too (RFC 9110 wants them all). Asking
    each route whether it would fully match the same request with another method
    also sees the routes of included routers.
    """
    routes = request.app.router.routes
    return [
        method
        for method in HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    codes = {404: "not_found", 405: "method_not_allowed", 400: "bad_request"}
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request)) or headers.get("Allow", "")
    return error_response(
        exc.status_code,
        codes.get(exc.status_code, "http_error"),
        str(exc.detail),
        headers=headers or None,
    )


async def _clay_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ClayError)
    headers = None if exc.retry_after_s is None else {"Retry-After": str(exc.retry_after_s)}
    return error_response(exc.status, exc.code, exc.message, exc.field, headers=headers)


@contextlib.contextmanager
def fields_in_body() -> Iterator[None]:
    """The inputs a layer below names by themselves (``schedule``) came in the body.

    The routes that use this have always named a field of their body ``body.<name>``,
    as the body's validation errors do; the layer that refuses the input knows the
    name, not where the request carried it.
    """
    try:
        yield
    except ClayError as exc:
        if exc.field is not None:
            exc.field = f"body.{exc.field}"
        raise


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Logged with the traceback; the client gets no internals (which could hold secrets).
    log.exception("request failed", extra={"action": "api.error", "path": request.url.path})
    return error_response(500, "internal", "internal error; see the engine log")


async def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    """The disk refused a write: nothing was accepted, and the client is told what to do.

    Answered here rather than as a 500 so the connection stays usable (an unhandled
    error makes the server drop a keep-alive connection).
    """
    assert isinstance(exc, OSError)
    services = getattr(request.app.state, "services", None)
    home = str(services.get(HomePaths).home) if services is not None else "the ClayBot home"
    if is_disk_full(exc):
        return error_response(
            507,
            "disk_full",
            f"the disk holding {home} is full, so nothing was accepted; free some space "
            f"there (see `df -h {home}`) and retry: the engine carries on by itself",
            headers={"Retry-After": "5"},
        )
    log.error(
        "an I/O operation failed: %s",
        exc,
        extra={"action": "api.io_error", "path": request.url.path},
    )
    return error_response(
        503,
        "io_error",
        f"an I/O operation failed ({exc.strerror or type(exc).__name__}), so the request did "
        "not complete; see the engine log, then retry",
        headers={"Retry-After": "5"},
    )


Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]


def _in_path_shape(handler: Handler) -> Handler:
    """The same error in the shape the path's clients read (``error_shapes.py``): seed
    002's on ``/api/v1``, OpenAI's on the OpenAI-compatible door."""

    async def answer(request: Request, exc: Exception) -> JSONResponse:
        response = await handler(request, exc)
        error = json.loads(bytes(response.body))["error"]
        shaped = reshaped(
            request.url.path,
            response.status_code,
            error["code"],
            error["message"],
            error.get("field"),
        )
        if shaped is None:
            return response
        status, body, extra = shaped
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        return JSONResponse(json.loads(body), status_code=status, headers={**headers, **extra})

    return answer


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _in_path_shape(_unexpected))
    app.add_exception_handler(OSError, _in_path_shape(_storage_error))
    app.add_exception_handler(ClayError, _in_path_shape(_clay_error))
    app.add_exception_handler(RequestValidationError, _in_path_shape(_validation_error))
    app.add_exception_handler(StarletteHTTPException, _in_path_shape(_http_error))
