"""The egress proxy through its own door, a command's Unix socket: a name is resolved
once and only a checked address is connected to; bad requests, too many connections, a
slow head and an idle tunnel each end as they should; leaving ``listening`` cuts what
is still open."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from claybot.net.address import IPAddress, address_refusal
from claybot.net.egress import EgressLimits, EgressProxy
from tests.jobs.egress_probe import PUBLIC_HOST

PUBLIC = ipaddress.ip_address(PUBLIC_HOST)


def public_only_but_ours(address: IPAddress) -> str | None:
    return None if address == PUBLIC else address_refusal(address)


@asynccontextmanager
async def held_server() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A server on the "public" address that records what arrives and never closes first."""
    received: list[bytes] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        received.append(head)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read()  # until the proxy closes its side

    server = await asyncio.start_server(hold, PUBLIC_HOST, 0)
    async with server:
        yield server.sockets[0].getsockname()[1], received


async def ask(path: str, request: bytes) -> bytes:
    """What the proxy answers ``request`` with, up to its first blank line."""
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()


async def test_a_name_is_resolved_once_and_its_checked_address_is_the_one_connected() -> None:
    answers = {"rebinds.test": [[PUBLIC], [ipaddress.ip_address("127.0.0.1")]]}
    answers["mixed.test"] = [[PUBLIC, ipaddress.ip_address("10.0.0.5")]]
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return answers[host].pop(0)  # a second lookup would point inward

    proxy = EgressProxy(resolve=resolve, rule=public_only_but_ours)
    async with held_server() as (port, received), proxy.listening("test") as path:
        answer = await ask(
            path, f"GET http://rebinds.test:{port}/x?y=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        )
        assert answer.startswith(b"HTTP/1.1 200 OK"), answer
        [head] = received
        assert head.startswith(b"GET /x?y=1 HTTP/1.1\r\nHost: rebinds.test:%d\r\n" % port)
        assert b"Connection: close" in head
        refused = await ask(
            path, f"CONNECT mixed.test:{port} HTTP/1.1\r\nHost: mixed.test:{port}\r\n\r\n".encode()
        )
    assert refused.startswith(
        b"HTTP/1.1 403 mixed.test (10.0.0.5) is refused: it is a private address"
    ), refused
    assert asked == ["rebinds.test", "mixed.test"]
    assert len(received) == 1  # the refused name reached nothing
    await proxy.close()


async def test_bad_requests_too_many_connections_and_silence_end_as_they_should() -> None:
    limits = EgressLimits(head_timeout_s=0.5, idle_timeout_s=0.5, max_connections=2)
    proxy = EgressProxy(rule=public_only_but_ours, limits=limits)
    async with held_server() as (port, _), proxy.listening("test") as path:
        assert (await ask(path, b"HELLO\r\n\r\n")).startswith(b"HTTP/1.1 400 not an HTTP")
        https = await ask(path, b"GET https://example.com/ HTTP/1.1\r\nHost: e\r\n\r\n")
        assert https.startswith(b"HTTP/1.1 400 ") and b"CONNECT" in https
        huge = b"GET http://a.test/ HTTP/1.1\r\nX: " + b"x" * 40_000 + b"\r\n\r\n"
        assert (await ask(path, huge)).startswith(b"HTTP/1.1 431 ")

        # Two connections that say nothing fill the cap: a third is turned away at once,
        # and the two are closed once the head's time is up.
        quiet = [await asyncio.open_unix_connection(path) for _ in range(2)]
        assert (await ask(path, b"")).startswith(b"HTTP/1.1 503 too many connections")
        for reader, _writer in quiet:
            async with asyncio.timeout(5):
                assert (await reader.read()).startswith(b"HTTP/1.1 408 ")

        # A tunnel quiet both ways is closed after idle_timeout_s.
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(f"CONNECT {PUBLIC_HOST}:{port} HTTP/1.0\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        writer.write(b"GET / HTTP/1.1\r\nHost: p\r\n\r\n")
        opened = time.monotonic()
        async with asyncio.timeout(5):
            assert (await reader.read()).endswith(b"ok")  # the answer, then the close
        assert time.monotonic() - opened >= limits.idle_timeout_s
        writer.close()

        # What is still open when the command ends is cut.
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(f"CONNECT {PUBLIC_HOST}:{port} HTTP/1.0\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
    async with asyncio.timeout(5):
        assert await reader.read() == b""
    writer.close()
    await proxy.close()
