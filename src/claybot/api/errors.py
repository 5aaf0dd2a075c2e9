"""One error shape for every endpoint: ``{"ok": false, "error": {"code", "message", "field"?}}``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.routing import Match

from claybot.agents.system import AgentNotFound, EngineStopping, MessageTooLarge
from claybot.config.store import ConfigError
from claybot.db.errors import StoreError
from claybot.durable.group_commit import is_disk_full
from claybot.plugins import PluginError

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


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
    message = "; ".join(f"{_field_path(e.get('loc', ()))}: {e.get('msg')}" for e in errors)
    return error_response(422, "invalid_request", message, field or None)


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


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.field)


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    return error_response(404, "not_found", str(exc))


async def _too_large(request: Request, exc: Exception) -> JSONResponse:
    return error_response(413, "too_large", str(exc), "text")


async def _stopping(request: Request, exc: Exception) -> JSONResponse:
    return error_response(503, "stopping", str(exc), headers={"Retry-After": "1"})


async def _config_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ConfigError)
    return error_response(500, "config_invalid", str(exc))


async def _plugin_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PluginError)
    return error_response(exc.http_status, exc.code, exc.message, exc.field)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Logged with the traceback; the client gets no internals (which could hold secrets).
    log.exception("request failed", extra={"action": "api.error", "path": request.url.path})
    return error_response(500, "internal", "internal error; see the engine log")


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(503, "database_unavailable", str(exc), headers={"Retry-After": "5"})


async def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    """The disk refused a write: nothing was accepted, and the client is told what to do.

    Answered here rather than as a 500 so the connection stays usable (an unhandled
    error makes the server drop a keep-alive connection).
    """
    assert isinstance(exc, OSError)
    engine = getattr(request.app.state, "engine", None)
    home = str(engine.paths.home) if engine is not None else "the ClayBot home"
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


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(OSError, _storage_error)
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(PluginError, _plugin_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(AgentNotFound, _not_found)
    app.add_exception_handler(MessageTooLarge, _too_large)
    app.add_exception_handler(EngineStopping, _stopping)
    app.add_exception_handler(ConfigError, _config_error)
