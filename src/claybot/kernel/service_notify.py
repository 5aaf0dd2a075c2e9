"""Telling whoever started the engine that it is ready: systemd's notify protocol.

A process started by systemd with ``Type=notify`` finds a datagram socket's address
in ``NOTIFY_SOCKET`` and sends ``READY=1`` once it serves, ``STOPPING=1`` when it
begins to stop (``sd_notify(3)``). ``claybot start --detach`` waits for the same
datagram, so one signal means "ready" to both, and neither has to guess from files
appearing or poll the socket while the engine still probes its sandbox.

``ServiceNotifier`` is the engine's side; ``NotifyListener`` the side that waits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

NOTIFY_SOCKET_ENV = "NOTIFY_SOCKET"
READY = "READY=1"
STOPPING = "STOPPING=1"
MAX_DATAGRAM_BYTES = 4096


def _socket_address(address: str) -> str | bytes:
    # "@name" is Linux's abstract namespace, which has no file; its first byte is NUL.
    if address.startswith("@"):
        return b"\0" + address[1:].encode()
    return address


class ServiceNotifier:
    """Sends states to ``NOTIFY_SOCKET``; with no such socket, sends nothing."""

    def __init__(self, address: str | None) -> None:
        self.address = address or None

    @classmethod
    def take_from(cls, environ: MutableMapping[str, str]) -> ServiceNotifier:
        """The notifier ``environ`` names, removed from it so that what the engine
        starts (commands, MCP servers, plugins) cannot speak for it."""
        return cls(environ.pop(NOTIFY_SOCKET_ENV, None))

    def notify(self, *states: str) -> bool:
        """Send ``states`` as one datagram; False when there is no one to tell or it failed.

        A failure is not the engine's to handle: a manager that stopped listening has
        nothing to be told.
        """
        if self.address is None:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            try:
                sock.sendto("\n".join(states).encode(), _socket_address(self.address))
            except OSError:
                return False
        return True


class NotifyListener:
    """A notify socket in a private temporary folder, for a child to report to."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="claybot-notify-"))  # 0700
        self.address = str(self._folder / "notify.sock")
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(self.address)

    def receive(self, timeout_s: float) -> list[str]:
        """The states of the next datagram, or [] when none came within ``timeout_s``."""
        self._socket.settimeout(timeout_s)
        try:
            data = self._socket.recv(MAX_DATAGRAM_BYTES)
        except TimeoutError:
            return []
        return data.decode(errors="replace").splitlines()

    def close(self) -> None:
        self._socket.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.address)
        with contextlib.suppress(OSError):
            self._folder.rmdir()

    def __enter__(self) -> NotifyListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
