"""The ``web`` plugin: ``fetch_url`` needs @network and never reaches inward unless allowed."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.net.address import IPAddress, address_refusal
from claybot.net.guarded_fetch import FetchFailed, FetchRefused, UrlFetcher
from claybot.permissions.model import Permissions
from claybot.plugins.builtin.web import FetchUrlArguments, FetchUrlTool, WebSettings
from claybot.tools.base import ToolContext, ToolResult
from tests.agents.test_agents import next_event
from tests.conftest import write_settings


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


# -- a tiny HTTP server on loopback -----------------------------------------------------


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    endless: bool = False  # stream a body that never ends, until the client hangs up


@dataclass
class TinyServer:
    port: int
    routes: dict[str, Route]
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    handlers: set[asyncio.Task[None]] = field(default_factory=set)
    streamed: int = 0  # bytes of endless bodies sent

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


async def _serve(
    server: TinyServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    task = asyncio.current_task()
    assert task is not None
    server.handlers.add(task)
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        path = request_line.split(" ")[1]
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines if line)
        }
        server.requests.append((path, headers))
        route = server.routes.get(path, Route(404, b"not found"))
        if route.delay_s:
            await asyncio.sleep(route.delay_s)
        extra = "".join(f"{name}: {value}\r\n" for name, value in route.headers.items())
        if route.endless:
            writer.write(f"HTTP/1.1 200 OK\r\nConnection: close\r\n{extra}\r\n".encode())
            while True:
                writer.write(b"y" * 65536)
                await writer.drain()
                server.streamed += 65536
        writer.write(
            f"HTTP/1.1 {route.status} X\r\nContent-Length: {len(route.body)}\r\n"
            f"Connection: close\r\n{extra}\r\n".encode()
            + route.body
        )
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()
        server.handlers.discard(task)


@pytest.fixture
async def tiny() -> AsyncIterator[TinyServer]:
    holder: list[TinyServer] = []
    listener = await asyncio.start_server(
        lambda r, w: _serve(holder[0], r, w), host="127.0.0.1", port=0
    )
    port = listener.sockets[0].getsockname()[1]
    server = TinyServer(
        port,
        {
            "/hello": Route(body=b"hello from loopback", headers={"Content-Type": "text/plain"}),
            "/big": Route(body=b"x" * 100_000, headers={"Content-Type": "text/plain"}),
            "/slow": Route(body=b"late", delay_s=5.0),
            "/image": Route(body=b"\x89PNG\r\n\x1a\n", headers={"Content-Type": "image/png"}),
            "/endless": Route(endless=True, headers={"Content-Type": "text/plain"}),
        },
    )
    holder.append(server)
    yield server
    listener.close()
    for task in list(server.handlers):
        task.cancel()
    await asyncio.gather(*server.handlers, return_exceptions=True)


NETWORK = ToolContext("agent", "user", None, Permissions(network=True))


def fixed_resolver(table: dict[str, str]) -> Any:
    async def resolve(host: str, port: int) -> list[IPAddress]:
        if host not in table:
            raise OSError(f"no such host {host!r}")
        return [ipaddress.ip_address(table[host])]

    return resolve


def tool(settings: WebSettings, fetcher: UrlFetcher | None = None) -> FetchUrlTool:
    return FetchUrlTool(fetcher or UrlFetcher(settings), settings)


async def run(tool: FetchUrlTool, url: str, **arguments: Any) -> ToolResult:
    return await tool.run(FetchUrlArguments(url=url, **arguments), NETWORK)


def body_of(result: ToolResult) -> str:
    return result.text.split("\n\n", 1)[1]


# -- the address policy (pure) --------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.1.1",
        "172.16.0.5",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "2002:a00:1::1",  # 6to4 wrapping 10.0.0.1
        "64:ff9b::c0a8:101",  # NAT64 of 192.168.1.1
    ],
)
def test_inward_addresses_are_refused(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_refusals_say_why() -> None:
    assert "loopback" in (address_refusal(ipaddress.ip_address("::ffff:127.0.0.1")) or "")
    assert "link-local" in (address_refusal(ipaddress.ip_address("169.254.1.1")) or "")


# -- the fetch, unit level ------------------------------------------------------------


async def test_without_network_permission_nothing_is_fetched(tiny: TinyServer) -> None:
    web = tool(WebSettings(allow_private_addresses=True))
    result = await web.run(
        FetchUrlArguments(url=tiny.url("/hello")), ToolContext("a", "user", None)
    )
    assert result.is_error and "needs @network" in result.text
    assert "request_permission" in result.text
    assert tiny.requests == []


async def test_only_http_and_https(tiny: TinyServer) -> None:
    web = tool(WebSettings(allow_private_addresses=True))
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://x/", "http:///nohost"):
        result = await run(web, url)
        assert result.is_error and result.text.startswith("Refused"), (url, result.text)


async def test_names_resolving_inward_are_refused_before_connecting(tiny: TinyServer) -> None:
    fetcher = UrlFetcher(WebSettings(), resolve=fixed_resolver({"intranet.test": "127.0.0.1"}))
    result = await run(tool(WebSettings(), fetcher), tiny.url("/hello", host="intranet.test"))
    assert result.is_error and "loopback" in result.text and "127.0.0.1" in result.text
    assert tiny.requests == []


async def test_the_checked_address_is_the_one_connected_to(tiny: TinyServer) -> None:
    """The resolver answers once; the name is kept for Host, the IP for the socket."""
    answers = iter(["127.0.0.1", "10.0.0.1"])  # a rebinding resolver: inward on the 2nd ask

    async def rebinding(host: str, port: int) -> list[IPAddress]:
        return [ipaddress.ip_address(next(answers))]

    settings = WebSettings(allow_private_addresses=True)
    fetcher = UrlFetcher(settings, resolve=rebinding)
    page = await fetcher.fetch(tiny.url("/hello", host="site.test"))
    assert page.status == 200 and page.body == b"hello from loopback"
    assert tiny.requests == [("/hello", tiny.requests[0][1])]
    assert tiny.requests[0][1]["host"] == f"site.test:{tiny.port}"


async def test_a_redirect_to_a_private_address_is_refused(tiny: TinyServer) -> None:
    # "public.test" is the one address the injected policy treats as public.
    tiny.routes["/to-internal"] = Route(
        302, headers={"Location": f"http://internal.test:{tiny.port}/hello"}
    )
    tiny.routes["/to-literal"] = Route(301, headers={"Location": "http://10.0.0.7/admin"})
    tiny.routes["/to-v6"] = Route(307, headers={"Location": f"http://[::1]:{tiny.port}/hello"})
    tiny.routes["/to-hello"] = Route(302, headers={"Location": "/hello"})
    resolve = fixed_resolver({"public.test": "127.0.0.1", "internal.test": "127.0.0.2"})

    def policy(address: IPAddress) -> str | None:
        return None if str(address) == "127.0.0.1" else address_refusal(address)

    web = tool(WebSettings(), UrlFetcher(WebSettings(), resolve=resolve, policy=policy))
    for path, shown in (
        ("/to-internal", "127.0.0.2"),
        ("/to-literal", "10.0.0.7"),
        ("/to-v6", "::1"),
    ):
        result = await run(web, tiny.url(path, host="public.test"))
        assert result.is_error and "Refused" in result.text and shown in result.text, result.text
    # Only the first hops reached the server; the inward ones were never requested.
    assert [path for path, _ in tiny.requests] == ["/to-internal", "/to-literal", "/to-v6"]
    # A redirect that stays on the allowed host is followed.
    result = await run(web, tiny.url("/to-hello", host="public.test"))
    assert not result.is_error and "hello from loopback" in result.text
    assert f"url: http://public.test:{tiny.port}/hello" in result.text


@pytest.fixture
def site_certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the name ``site.test`` (and nothing else)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=site.test"),
            *("-addext", "subjectAltName=DNS:site.test"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_https_checks_the_certificate_against_the_name_not_the_ip(
    tiny: TinyServer, site_certificate: tuple[Path, Path]
) -> None:
    """The socket goes to the pinned IP; SNI and the certificate check still use the name."""
    cert, key = site_certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    names: list[str | None] = []

    def record_sni(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        names.append(name)

    server_tls.sni_callback = record_sni
    listener = await asyncio.start_server(
        lambda r, w: _serve(tiny, r, w), host="127.0.0.1", port=0, ssl=server_tls
    )
    port = listener.sockets[0].getsockname()[1]
    client_tls = ssl.create_default_context(cafile=str(cert))
    resolve = fixed_resolver({"site.test": "127.0.0.1", "other.test": "127.0.0.1"})
    settings = WebSettings(allow_private_addresses=True)
    web = tool(settings, UrlFetcher(settings, resolve=resolve, verify=client_tls))
    try:
        result = await run(web, f"https://site.test:{port}/hello")
        assert not result.is_error, result.text
        assert "hello from loopback" in result.text
        assert names == ["site.test"]
        # Same IP, another name: the certificate does not match it, so nothing is fetched.
        other = await run(web, f"https://other.test:{port}/hello")
        assert other.is_error and "Fetch failed" in other.text, other.text
        assert "CERTIFICATE_VERIFY_FAILED" in other.text or "certificate" in other.text.lower()
        assert [path for path, _ in tiny.requests] == ["/hello"]
    finally:
        listener.close()


async def test_redirect_loops_stop(tiny: TinyServer) -> None:
    tiny.routes["/loop"] = Route(302, headers={"Location": "/loop"})
    web = tool(WebSettings(allow_private_addresses=True, max_redirects=3))
    result = await run(web, tiny.url("/loop"))
    assert result.is_error and "3 redirects" in result.text
    assert len(tiny.requests) == 4


async def test_the_body_is_cut_at_the_cap(tiny: TinyServer) -> None:
    web = tool(WebSettings(allow_private_addresses=True, max_bytes=5000))
    result = await run(web, tiny.url("/big"))
    assert not result.is_error
    assert "[truncated: the body is longer than 5000 bytes]" in result.text
    assert body_of(result) == "x" * 5000
    smaller = await run(web, tiny.url("/big"), maxBytes=10)
    assert body_of(smaller) == "x" * 10 and "longer than 10 bytes" in smaller.text
    larger = await run(web, tiny.url("/big"), maxBytes=10**9)  # never above the setting
    assert body_of(larger) == "x" * 5000


async def test_an_endless_body_is_read_only_up_to_the_cap(tiny: TinyServer) -> None:
    web = tool(WebSettings(allow_private_addresses=True, max_bytes=200_000))
    result = await run(web, tiny.url("/endless"))
    assert not result.is_error and body_of(result) == "y" * 200_000
    assert "[truncated: the body is longer than 200000 bytes]" in result.text
    # The client hung up: the server stops soon after the cap (socket buffers aside).
    await asyncio.sleep(0.2)
    sent = tiny.streamed
    await asyncio.sleep(0.2)
    assert tiny.streamed == sent


async def test_status_type_and_binary_bodies(tiny: TinyServer) -> None:
    web = tool(WebSettings(allow_private_addresses=True))
    result = await run(web, tiny.url("/hello"))
    assert result.text.splitlines()[:3] == [
        "status: 200",
        f"url: {tiny.url('/hello')}",
        "content-type: text/plain",
    ]
    missing = await run(web, tiny.url("/absent"))
    assert not missing.is_error and missing.text.startswith("status: 404")
    tiny.routes["/odd"] = Route(
        body=b"caf\xc3\xa9", headers={"Content-Type": "text/plain; charset=nope"}
    )
    odd = await run(web, tiny.url("/odd"))
    assert not odd.is_error and body_of(odd) == "café"
    tiny.routes["/latin"] = Route(
        body=b"caf\xe9", headers={"Content-Type": "text/html; charset=latin-1"}
    )
    assert body_of(await run(web, tiny.url("/latin"))) == "café"
    image = await run(web, tiny.url("/image"))
    assert "binary content, 8 bytes read, not shown" in image.text


async def test_read_and_total_timeouts(tiny: TinyServer) -> None:
    read = tool(WebSettings(allow_private_addresses=True, read_timeout_s=0.2))
    started = asyncio.get_running_loop().time()
    result = await run(read, tiny.url("/slow"))
    assert result.is_error and "timed out" in result.text
    total = tool(WebSettings(allow_private_addresses=True, total_timeout_s=0.3))
    result = await run(total, tiny.url("/slow"))
    assert result.is_error and "timed out after 0.3 s" in result.text
    assert asyncio.get_running_loop().time() - started < 3


async def test_unresolvable_names_fail_cleanly() -> None:
    fetcher = UrlFetcher(WebSettings(), resolve=fixed_resolver({}))
    with pytest.raises(FetchFailed, match="could not resolve"):
        await fetcher.fetch("https://nowhere.test/")
    with pytest.raises(FetchRefused):
        await fetcher.fetch("https://[::1]/")


# -- through a real agent turn ----------------------------------------------------------


async def _fetch_after_grant(
    paths: HomePaths, plugin_settings: dict[str, Any], url: str
) -> list[Any]:
    """Fetch without @network, ask for it, get it granted, fetch again; the tool results."""
    script = [
        call("fetch_url", url=url),
        call("request_permission", permission="@network", reason="to read a page"),
        "Waiting for the network.",
        call("fetch_url", url=url),
        "done",
    ]
    write_settings(
        paths,
        {
            "providers": [
                {"id": "s", "type": "scripted", "model": "script", "options": {"responses": script}}
            ],
            "plugins": [{"instanceId": "web", "pluginId": "web", "settings": plugin_settings}],
        },
    )
    engine = Engine(paths, EngineOptions(port=0))
    events: list[Event] = []
    engine.events.add_listener(events.append)
    await engine.start()
    try:
        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "read it"))
        await next_event(events, "agent.outgoing")
        [request] = engine.permissions.list("pending")
        await engine.permissions.decide(request.id, True, "test")
        await next_event(events, "agent.outgoing", count=2)
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=100
        )
        return [r["output"] for r in page.records if r["type"] == "tool_result"]
    finally:
        await engine.stop()


async def test_agent_turn_refused_without_network_and_on_loopback_by_default(
    paths: HomePaths, tiny: TinyServer
) -> None:
    results = await _fetch_after_grant(paths, {}, tiny.url("/hello"))
    assert [r["isError"] for r in results] == [True, False, True]
    assert "needs @network" in results[0]["text"]
    assert "loopback" in results[2]["text"] and "allowPrivateAddresses" in results[2]["text"]
    assert tiny.requests == []


async def test_agent_turn_fetches_loopback_when_private_addresses_are_allowed(
    paths: HomePaths, tiny: TinyServer
) -> None:
    results = await _fetch_after_grant(paths, {"allowPrivateAddresses": True}, tiny.url("/hello"))
    assert [r["isError"] for r in results] == [True, False, False]
    assert "status: 200" in results[2]["text"]
    assert "hello from loopback" in results[2]["text"]
    assert len(tiny.requests) == 1
