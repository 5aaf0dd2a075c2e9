"""Where a browser on this machine reaches the engine's TCP listener."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["EngineAddress"]


class EngineAddress:
    """The listener's address as settings name it and as it was bound (the port is
    None while no TCP listener runs)."""

    def __init__(self, host: Callable[[], str], port: Callable[[], int | None]) -> None:
        self._host = host
        self._port = port

    def url(self, path: str) -> str:
        """``http://host:port`` and ``path``: a listener on every address is reached on
        this machine's own, and an IPv6 host is bracketed."""
        host = self._host()
        if host in ("0.0.0.0", "::"):  # listening everywhere: this machine's own address works
            host = "127.0.0.1"
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self._port()}{path}"
