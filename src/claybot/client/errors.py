"""Errors of the engine client, importable without loading httpx (CLI start-up time)."""

from __future__ import annotations


class EngineNotRunning(RuntimeError):
    pass


class EngineApiError(RuntimeError):
    """The engine answered with an error body."""

    def __init__(self, status: int, code: str, message: str, field: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field
