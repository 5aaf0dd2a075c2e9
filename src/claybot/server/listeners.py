"""Serving the engine's ASGI app on the Unix socket and on TCP with uvicorn.

The sockets are bound here rather than by uvicorn: the Unix socket must be 0600
from the moment it exists (uvicorn would chmod it 0666), and binding TCP port 0
tells us the real port before serving starts.

uvicorn logs a WebSocket handshake's path with its query string, and a browser's
WebSocket can carry its key only there (``?token=``, codeck's client). The TCP
listener takes the token out of the query before uvicorn logs the line
(``tcp_auth.take_query_token``); ``QueryTokenFilter`` is the second lock, for any line
that would still carry one (the socket's, or the websockets library's request line
at the debug level).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import socket
import stat
from collections.abc import Generator
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp


def bind_unix_socket(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # no window where the socket is more open than 0600
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(1024)
    sock.setblocking(False)
    return sock


class SocketPathTaken(OSError):
    """The configured socket path holds something that is not a stale socket."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(errno.EEXIST, f"{path} {what}")


def bind_configured_socket(path: Path) -> socket.socket:
    """The socket settings.json's ``engine.socketPath`` names, beside the home's: bound
    0600 as that one is, in a folder made 0700 if there was none. What is there already
    is replaced only if it is a socket nobody answers on (a crashed engine's); a file,
    or a socket another process serves, is left alone (SocketPathTaken)."""
    if path.is_symlink() or path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise SocketPathTaken(path, "exists and is not a socket")
        with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as probe:
            try:
                probe.connect(str(path))
            except OSError:
                pass  # stale: bind_unix_socket replaces it
            else:
                raise SocketPathTaken(path, "is served by another process")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return bind_unix_socket(path)


class PortInUse(OSError):
    """The TCP port is taken: by another engine (of another home) or another program."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"{host}:{port} is already in use")
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return (
            f"port {self.port} on {self.host} is already in use (another ClayBot engine, or "
            "another program). Start on another port with `claybot start --port N`, or set "
            "engine.port in settings.json"
        )


def bind_tcp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from exc
        raise
    sock.listen(1024)
    sock.setblocking(False)
    return sock


TOKEN_IN_QUERY = re.compile(r"(?i)([?&]token=)[^&\s\"']+")
UVICORN_LOGGERS = ("uvicorn.error", "uvicorn.access")


def _redacted(value: object) -> object:
    return TOKEN_IN_QUERY.sub(r"\1[redacted]", value) if isinstance(value, str) else value


class QueryTokenFilter(logging.Filter):
    """Replaces the value of any ``token=`` of a URL's query in a log line. The message
    and its arguments are redacted each in place: uvicorn's access formatter unpacks
    the arguments, so they keep their number and order."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(arg) for arg in record.args)
        return True


def redact_query_tokens() -> None:
    """Put ``QueryTokenFilter`` on uvicorn's loggers (once: uvicorn's own logging setup,
    which each server's config runs, keeps a logger's filters)."""
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QueryTokenFilter) for f in logger.filters):
            logger.addFilter(QueryTokenFilter())


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the engine."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def make_server(app: ASGIApp) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
    )
    redact_query_tokens()
    return _Server(config)
