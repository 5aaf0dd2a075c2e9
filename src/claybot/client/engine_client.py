"""Talking to a running engine over its Unix socket (the CLI's only door)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

from claybot.client.errors import EngineApiError, EngineNotRunning

__all__ = ["EngineApiError", "EngineClient", "EngineNotRunning"]

BASE_URL = "http://claybot"


class EngineClient:
    def __init__(
        self,
        socket_path: Path,
        *,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,  # a test's stand-in for the socket
    ) -> None:
        self.socket_path = socket_path
        self._client = httpx.Client(
            transport=transport or httpx.HTTPTransport(uds=str(socket_path)),
            base_url=BASE_URL,
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_running(self) -> bool:
        if not self.socket_path.exists():
            return False
        try:
            self.request("GET", "/v1/engine/status")
        except EngineNotRunning:
            return False
        return True

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        body = _json_of(self._send(method, path, **kwargs))
        return body if isinstance(body, dict) else {"value": body}

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The engine's answer, or (an error status) its error raised as EngineApiError."""
        try:
            response = self._client.request(method, path, **kwargs)
        except (httpx.ConnectError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise EngineNotRunning(f"no engine answers on {self.socket_path}") from exc
        _raise_for_error(response)
        return response

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=_given(params))

    def get_text(self, path: str, **params: Any) -> str:
        """A text/plain route (a proactive agent's log); its errors are JSON all the same."""
        return self._send("GET", path, params=_given(params)).text

    def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.request("POST", path, json=body or {})

    def upload(self, path: str, name: str, data: bytes) -> dict[str, Any]:
        """A multipart upload of one file (field ``file``), as ``POST /v1/engine/files`` takes."""
        return self.request("POST", path, files={"file": (name, data)})

    def get_bytes(self, path: str, **params: Any) -> bytes:
        """A route that answers with a file's bytes; its errors are JSON all the same."""
        return self._send("GET", path, params=_given(params)).content

    def delete(self, path: str) -> dict[str, Any]:
        return self.request("DELETE", path)

    def events(self, last_event_id: int | None = None) -> Iterator[dict[str, Any]]:
        """Follow the SSE stream; yields each event envelope (the init frame first)."""
        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        try:
            with connect_sse(
                self._client,
                "GET",
                "/v1/engine/events",
                headers=headers,
                timeout=httpx.Timeout(None, connect=5),
            ) as source:
                if source.response.is_error:  # refused (a bad Last-Event-ID): its body says why
                    source.response.read()
                    _raise_for_error(source.response)
                for event in source.iter_sse():
                    if event.data:  # no data, no event (the SSE rule; a ping after an id)
                        yield event.json()
        except (httpx.ConnectError, FileNotFoundError) as exc:
            raise EngineNotRunning(f"no engine answers on {self.socket_path}") from exc


def _raise_for_error(response: httpx.Response) -> None:
    """An error status's body, raised as EngineApiError."""
    if response.status_code < 400:
        return
    body = _json_of(response)
    error = body.get("error", {}) if isinstance(body, dict) else {}
    if isinstance(error, str):  # {error, code, field?}: seed 002's, and codeck's
        error = {"code": body.get("code", "error"), "message": error, "field": body.get("field")}
    raise EngineApiError(
        response.status_code,
        str(error.get("code", "error")),
        str(error.get("message", response.text)),
        error.get("field"),
    )


def _given(params: dict[str, Any]) -> dict[str, Any]:
    """Query parameters without the ones left out (None)."""
    return {key: value for key, value in params.items() if value is not None}


def _json_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {}
