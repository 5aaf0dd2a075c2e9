"""The egress proxy: the only way a job's script reaches the network.

A job's ``run_python`` runs in a network namespace of its own, empty but for its
loopback (``claybot.sandbox``, network "egress"); the proxy listens on a Unix socket
bound into it, and a relay there carries the script's connections to it (the
``HTTP(S)_PROXY`` variables point at the relay). For each request the proxy resolves
the host once, checks every address with the rule ``fetch_url`` keeps
(``claybot.net.address``), connects to a checked address only (a DNS answer that
changes after the check reaches nothing), and refuses anything else with 403 and
the reason. It speaks the two forms an HTTP proxy is asked in: ``CONNECT host:port``
(https, or any TCP) and an absolute-form ``http://`` request, which it sends on in
origin form with ``Connection: close``; only the request line and the headers are
parsed (by h11), the rest passes through as bytes.

Bounded: the request head (size and time), the connect, the connections one command
has open at once, and a connection idle both ways. Nothing that passes through is
logged; a refusal is, with the host, the port and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import shutil
import tempfile
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial

import h11

from claybot.net.address import AddressPolicy, IPAddress, Resolve, address_refusal, resolve_host

log = logging.getLogger(__name__)

CHUNK = 65536
# The sockets' folder is in /tmp, which every sandbox gets fresh and empty, so no
# command sees another's socket; each command's own is bound in where it looks for it.
SOCKET_PARENT = "/tmp"
PUBLIC_ONLY = "a job reaches public internet addresses only"
# Not passed on: they concern the connection to the proxy, not the request.
# Transfer-Encoding stays: the body is relayed as it came.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
    }
)


@dataclass(frozen=True)
class EgressLimits:
    connect_timeout_s: float = 10.0  # resolving and connecting to the destination
    head_timeout_s: float = 10.0  # for the request line and headers to arrive
    idle_timeout_s: float = 120.0  # a connection quiet both ways this long is closed
    max_connections: int = 32  # open at once through one command's socket
    max_head_bytes: int = 32 * 1024


class Refused(Exception):
    """The request is answered with ``status`` and ``reason`` and goes no further."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class ProxyRequest:
    method: str
    host: str
    port: int
    tunnel: bool  # CONNECT: bytes both ways once connected
    target: str  # the origin-form target sent on (not for a tunnel)
    http_version: str
    headers: list[tuple[bytes, bytes]]


def parse_request(head: bytes) -> ProxyRequest:
    """A proxy request from its head (the request line and headers, through the blank
    line); ``Refused`` (400) when it is not one."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=len(head) + 1)
    connection.receive_data(head)
    try:
        event = connection.next_event()
    except h11.RemoteProtocolError as exc:
        raise Refused(400, f"not an HTTP request ({exc})") from None
    if not isinstance(event, h11.Request):
        raise Refused(400, "not an HTTP request")
    method = event.method.decode("ascii")
    target = event.target.decode("ascii")  # h11 allows visible ASCII only
    headers = list(event.headers.raw_items())
    version = event.http_version.decode("ascii")
    if method == "CONNECT":
        host, port = _authority(target, default_port=None)
        return ProxyRequest(method, host, port, True, "", version, headers)
    try:
        url = urllib.parse.urlsplit(target)
    except ValueError as exc:  # a bracket left open, and the like
        raise Refused(400, f"not a URL: {target[:100]!r} ({exc})") from None
    if url.scheme.lower() != "http":
        raise Refused(
            400,
            f"the proxy takes absolute http:// URLs and CONNECT (https goes through CONNECT), "
            f"not {target[:100]!r}",
        )
    host, port = _authority(url.netloc, default_port=80)
    origin = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return ProxyRequest(method, host, port, False, origin, version, headers)


def _authority(authority: str, default_port: int | None) -> tuple[str, int]:
    try:
        parsed = urllib.parse.urlsplit(f"//{authority}")
        port = parsed.port or default_port
    except ValueError:  # no such port, or a bracket left open
        raise Refused(400, f"not a host and port: {authority[:100]!r}") from None
    host = parsed.hostname
    if not host or port is None or parsed.username is not None:
        raise Refused(400, f"not a host and port: {authority[:100]!r}")
    return host, port


@dataclass
class _Socket:
    """One command's socket: what it has open."""

    owner: str
    handlers: set[asyncio.Task[None]] = field(default_factory=set)


class EgressProxy:
    """One per worker process; ``listening`` gives each command a socket of its own.

    ``rule`` is the address rule; anything but the default is for tests (which have
    no internet), and nothing a job or the settings say reaches it.
    """

    def __init__(
        self,
        *,
        resolve: Resolve = resolve_host,
        rule: AddressPolicy = address_refusal,
        limits: EgressLimits = EgressLimits(),
    ) -> None:
        self._resolve = resolve
        self._rule = rule
        self.limits = limits
        self._folder: str | None = None

    @contextlib.asynccontextmanager
    async def listening(self, owner: str) -> AsyncIterator[str]:
        """A Unix socket for one command (``owner`` names it in the log): its path,
        until the block ends; then every connection through it is cut."""
        self._folder = await asyncio.to_thread(_socket_folder, self._folder)
        path = os.path.join(self._folder, f"{secrets.token_hex(6)}.sock")
        state = _Socket(owner)
        server = await asyncio.start_unix_server(
            partial(self._accepted, state), path=path, limit=self.limits.max_head_bytes
        )
        try:
            yield path
        finally:
            server.close()
            for handler in state.handlers:
                handler.cancel()
            await asyncio.gather(*state.handlers, return_exceptions=True)
            await server.wait_closed()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    async def close(self) -> None:
        """Remove the sockets' folder (every ``listening`` block has ended)."""
        folder, self._folder = self._folder, None
        if folder is not None:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def _accepted(
        self, state: _Socket, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        state.handlers.add(handler)
        try:
            if len(state.handlers) > self.limits.max_connections:
                raise Refused(
                    503, f"too many connections at once (at most {self.limits.max_connections})"
                )
            await self._serve(state, reader, writer)
        except Refused as refused:
            with contextlib.suppress(OSError):
                await _answer(writer, refused.status, refused.reason)
        except OSError:
            pass  # the command or the destination went away
        finally:
            writer.close()
            state.handlers.discard(handler)

    async def _serve(
        self, state: _Socket, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            async with asyncio.timeout(self.limits.head_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return  # closed before it asked anything
        except asyncio.LimitOverrunError:
            raise Refused(431, "the request head is too large") from None
        except TimeoutError:
            raise Refused(408, "no request head in time") from None
        request = parse_request(head)
        try:
            addresses = await self._checked(request.host, request.port)
        except Refused as refused:
            log.info(
                "egress refused: %s",
                refused.reason,
                extra={
                    "action": "egress.refused",
                    "owner": state.owner,
                    "host": request.host,
                    "port": request.port,
                    "status": refused.status,
                },
            )
            raise
        upstream_reader, upstream = await self._connect(request, addresses)
        try:
            if request.tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.write(_origin_head(request))
            await self._splice(reader, writer, upstream_reader, upstream)
        finally:
            upstream.close()

    async def _checked(self, host: str, port: int) -> list[IPAddress]:
        """Every address of ``host``, each allowed by the rule; else ``Refused``."""
        addresses = await self._addresses(host, port)
        # All of them, not only the one used: a name that also points inward is refused.
        for address in addresses:
            reason = self._rule(address)
            if reason is not None:
                where = host if str(address) == host else f"{host} ({address})"
                raise Refused(403, f"{where} is refused: {reason}; {PUBLIC_ONLY}")
        return addresses

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass  # a name, resolved once: the connect uses these addresses
        try:
            async with asyncio.timeout(self.limits.connect_timeout_s):
                addresses = await self._resolve(host, port)
        except (OSError, TimeoutError) as exc:
            raise Refused(502, f"could not resolve {host!r}: {exc or 'timed out'}") from None
        if not addresses:
            raise Refused(502, f"{host!r} resolved to no address")
        return addresses

    async def _connect(
        self, request: ProxyRequest, addresses: list[IPAddress]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        failure = "no address"
        for address in addresses:
            try:
                async with asyncio.timeout(self.limits.connect_timeout_s):
                    # An address literal: asyncio connects without asking DNS again.
                    return await asyncio.open_connection(str(address), request.port)
            except TimeoutError:
                failure = f"no answer in {self.limits.connect_timeout_s:g} s"
            except OSError as exc:
                failure = exc.strerror or str(exc)
        raise Refused(502, f"could not connect to {request.host}:{request.port}: {failure}")

    async def _splice(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
    ) -> None:
        """Bytes both ways until both ends have finished, or neither has sent anything
        for ``idle_timeout_s``."""
        loop = asyncio.get_running_loop()
        idle_s = self.limits.idle_timeout_s
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(idle_s) as deadline:

                async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
                    try:
                        while data := await source.read(CHUNK):
                            deadline.reschedule(loop.time() + idle_s)
                            sink.write(data)
                            await sink.drain()
                        if sink.can_write_eof():
                            sink.write_eof()  # a half-close is passed on; the other way goes on
                    except OSError:
                        writer.close()  # one side broke: the whole connection ends
                        upstream.close()

                await asyncio.gather(pipe(reader, upstream), pipe(upstream_reader, writer))


def _socket_folder(folder: str | None) -> str:
    """The sockets' folder, made again if something (a /tmp cleaner) removed it. mkdtemp
    makes it 0700: only the engine's user reaches the sockets."""
    if folder is not None and os.path.isdir(folder):
        return folder
    return tempfile.mkdtemp(prefix="claybot-egress-", dir=SOCKET_PARENT)


def _origin_head(request: ProxyRequest) -> bytes:
    """The request as the destination gets it: origin form, its own Host, no proxy
    headers, and ``Connection: close`` (one request per connection through the proxy)."""
    named = {
        token.strip().lower()
        for name, value in request.headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    host = f"[{request.host}]" if ":" in request.host else request.host  # an IPv6 literal
    authority = host if request.port == 80 else f"{host}:{request.port}"
    lines = [f"{request.method} {request.target} HTTP/{request.http_version}".encode()]
    lines.append(b"Host: " + authority.encode("ascii"))
    for name, value in request.headers:
        lowered = name.lower()
        if lowered == b"host" or lowered in HOP_BY_HOP or lowered in named:
            continue
        lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    """The proxy's own answer. The reason is in the status line as well as the body:
    a client that fails a CONNECT shows only the status line."""
    phrase = "".join(c if " " <= c <= "~" else "?" for c in reason)[:300]
    body = f"ClayBot egress proxy: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode("ascii") + body)
    await writer.drain()
