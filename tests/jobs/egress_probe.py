"""A script a job's ``run_python`` runs to try every way out of its sandbox, and what it
found: direct TCP connects, HTTP (and CONNECT) through the proxy the environment names,
Unix sockets, a GET and a tunnel to a server the test treats as public, and the proxy
variables. The report is written as ``report.json`` (an artifact) and printed."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from claybot.net.address import address_refusal
from claybot.net.egress import EgressProxy

PUBLIC_HOST = "127.0.0.3"  # what the tests' proxies take for a public address
PROXY_URL = "http://127.0.0.1:3128"  # the relay inside the job's own namespace
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy")

_SCRIPT = r"""
import http.client, json, os, socket, urllib.error, urllib.parse, urllib.request

PLAN = json.loads({plan!r})
report = {{"env": {{k: os.environ.get(k) for k in PLAN["variables"]}}, "direct": {{}},
          "proxied": {{}}, "unix": {{}}, "public": {{}}}}
for host, port in PLAN["direct"]:
    try:
        socket.create_connection((host, port), timeout=5).close()
        report["direct"][f"{{host}} {{port}}"] = "connected"
    except OSError as exc:
        report["direct"][f"{{host}} {{port}}"] = f"{{type(exc).__name__}}: {{exc}}"
for url in PLAN["proxied"]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            report["proxied"][url] = f"answered {{response.status}}"
    except urllib.error.HTTPError as exc:
        report["proxied"][url] = f"HTTP {{exc.code}} {{exc.reason}}"
    except Exception as exc:
        report["proxied"][url] = f"{{type(exc).__name__}}: {{exc}}"
for path in PLAN["unix"]:
    try:
        with socket.socket(socket.AF_UNIX) as unix:
            unix.connect(path)
        report["unix"][path] = "connected"
    except OSError as exc:
        report["unix"][path] = f"{{type(exc).__name__}}: {{exc}}"
if PLAN["public"]:
    host, port = PLAN["public"]
    try:
        with urllib.request.urlopen(f"http://{{host}}:{{port}}/page?q=1", timeout=10) as response:
            report["public"]["get"] = response.read().decode()
    except Exception as exc:
        report["public"]["get"] = f"{{type(exc).__name__}}: {{exc}}"
    try:
        proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
        tunnel = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
        tunnel.set_tunnel(host, port)
        tunnel.request("GET", "/through-the-tunnel")
        report["public"]["connect"] = tunnel.getresponse().read().decode()
    except Exception as exc:
        report["public"]["connect"] = f"{{type(exc).__name__}}: {{exc}}"
open("report.json", "w").write(json.dumps(report))
print(json.dumps(report, indent=1))
"""


@dataclass
class Plan:
    direct: list[tuple[str, int]] = field(default_factory=list)
    proxied: list[str] = field(default_factory=list)
    unix: list[str] = field(default_factory=list)
    public: tuple[str, int] | None = None  # a server the test's proxy takes for public

    def script(self) -> str:
        plan = {
            "variables": list(PROXY_VARIABLES),
            "direct": self.direct,
            "proxied": self.proxied,
            "unix": self.unix,
            "public": self.public,
        }
        return _SCRIPT.format(plan=json.dumps(plan))


def silent_listener(host: str) -> socket.socket:
    """A TCP listener that never accepts: a connection that reached it waits in its
    backlog, where ``connections_seen`` finds it."""
    listener = socket.create_server((host, 0))
    listener.setblocking(False)
    return listener


def connections_seen(listener: socket.socket) -> int:
    seen = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return seen
        connection.close()
        seen += 1


def refused_by_the_proxy(outcome: str, rule: str) -> bool:
    """A plain http request gets the proxy's 403; https (CONNECT) fails its tunnel with
    the 403's status line. Either way the reason names the rule."""
    return ("HTTP 403" in outcome or "Tunnel connection failed: 403" in outcome) and (
        f"it is a {rule} address" in outcome
    )


def report_of(text: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(text)
    return report


def public_proxy() -> EgressProxy:
    """The proxy with the rule it always has, except that ``PUBLIC_HOST`` (a loopback
    address: there is no internet here) counts as public. Only a test builds one."""
    public = ipaddress.ip_address(PUBLIC_HOST)
    return EgressProxy(rule=lambda address: None if address == public else address_refusal(address))


@asynccontextmanager
async def public_server() -> AsyncIterator[tuple[int, list[dict[str, str]]]]:
    """An HTTP server on ``PUBLIC_HOST``: its port, and the request line and Host of each
    request it got (which it also answers with, as JSON)."""
    seen: list[dict[str, str]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, *headers = (await reader.readuntil(b"\r\n\r\n")).decode().strip().split("\r\n")
        host = next(h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("host:"))
        seen.append({"line": line, "host": host})
        body = json.dumps(seen[-1]).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, PUBLIC_HOST, 0)
    async with server:
        yield server.sockets[0].getsockname()[1], seen


def assert_public_reached(report: dict[str, Any], port: int, seen: list[dict[str, str]]) -> None:
    """The GET went through as an absolute-form request, the tunnel as a CONNECT, and
    the script had the proxy variables."""
    get = {"line": "GET /page?q=1 HTTP/1.1", "host": f"{PUBLIC_HOST}:{port}"}
    tunnelled = {"line": "GET /through-the-tunnel HTTP/1.1", "host": f"{PUBLIC_HOST}:{port}"}
    assert report["public"] == {"get": json.dumps(get), "connect": json.dumps(tunnelled)}
    assert seen == [get, tunnelled]
    # What urllib, requests, httpx and pip read; NO_PROXY empty: nothing goes around it.
    assert report["env"] == {
        **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), PROXY_URL),
        "NO_PROXY": "",
        "no_proxy": "",
    }
