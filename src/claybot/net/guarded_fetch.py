"""Fetching over http(s) without letting the fetch be turned against its own machine.

The host name is resolved once, every address it resolves to is checked (loopback,
private, link-local, multicast, reserved, unspecified and addresses that embed one
of those are refused unless private addresses are allowed; the rule is
``claybot.net.address``'s, which a job's egress proxy keeps too), and the request is
sent to the checked IP with the name kept for ``Host`` and TLS (SNI and certificate), so
a DNS answer that changes between the check and the connect (rebinding) reaches
nothing. Redirects are followed by hand, each hop checked the same way. The body is
streamed and cut at a byte cap; connect, read and total time are bounded.

The web plugin's ``fetch_url`` and a job's ``fetch_url`` both fetch through it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from claybot.net.address import AddressPolicy, IPAddress, Resolve, address_refusal, resolve_host

# httpx is imported where a fetch needs it, not with this module: it imports its own
# command line (rich, pygments) when they are installed, 80 ms of every engine start.
if TYPE_CHECKING:
    import httpx

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "ClayBot fetch_url (+https://github.com/claybot)"
PRIVATE_HINT = (
    "private addresses are fetched only when the web plugin's allowPrivateAddresses setting is on"
)

# Headers a caller may not set: they would undo the pinning or the byte cap.
_OWN_HEADERS = frozenset({"host", "accept-encoding", "content-length", "transfer-encoding"})


@dataclass(frozen=True)
class _Request:
    method: str
    headers: dict[str, str]
    body: str | bytes | None


class FetchLimits(Protocol):
    """What bounds a fetch (the web plugin's settings are one)."""

    @property
    def allow_private_addresses(self) -> bool: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def connect_timeout_s(self) -> float: ...
    @property
    def read_timeout_s(self) -> float: ...
    @property
    def total_timeout_s(self) -> float: ...
    @property
    def max_redirects(self) -> int: ...


@dataclass(frozen=True)
class FetchSettings:
    allow_private_addresses: bool = False
    max_bytes: int = 1_000_000
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 20.0
    total_timeout_s: float = 30.0
    max_redirects: int = 5


class FetchRefused(Exception):
    """The URL, or an address it leads to, is not allowed; nothing was sent there."""


class FetchFailed(Exception):
    """The fetch was allowed but did not complete (DNS, connection, timeout, protocol)."""


@dataclass(frozen=True)
class FetchedPage:
    url: str  # after redirects
    status: int
    content_type: str
    body: bytes
    truncated: bool
    charset: str | None

    def render(self, max_bytes: int) -> str:
        lines = [f"status: {self.status}", f"url: {self.url}"]
        lines.append(f"content-type: {self.content_type or '(none)'}")
        if self.truncated:
            lines.append(f"[truncated: the body is longer than {max_bytes} bytes]")
        if _is_textual(self.content_type):
            text = _decode(self.body, self.charset)
        else:
            text = f"[binary content, {len(self.body)} bytes read, not shown]"
        return "\n".join(lines) + "\n\n" + text


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know: UTF-8 is the best guess
        return body.decode("utf-8", errors="replace")


def _is_textual(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    if not media or media.startswith("text/"):
        return True
    return any(kind in media for kind in ("json", "xml", "javascript", "ecmascript", "yaml"))


def _checked_url(url: httpx.URL) -> httpx.URL:
    if url.scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs can be fetched, not {url.scheme or 'this'!r}")
    if not url.raw_host:
        raise FetchRefused(f"the URL {str(url)!r} has no host")
    return url


def _parse_url(raw: str) -> httpx.URL:
    import httpx

    try:
        return _checked_url(httpx.URL(raw))
    except httpx.InvalidURL as exc:
        raise FetchRefused(f"invalid URL {raw!r}: {exc}") from None


class UrlFetcher:
    """The fetch itself; the plugin wraps it as a tool. Resolver and policy are injectable."""

    def __init__(
        self,
        settings: FetchLimits,
        *,
        resolve: Resolve = resolve_host,
        policy: AddressPolicy = address_refusal,
        verify: ssl.SSLContext | bool = True,
        private_hint: str = PRIVATE_HINT,
    ) -> None:
        self._private_hint = private_hint
        self._settings = settings
        self._resolve = resolve
        self._policy = policy
        self._verify = verify  # certificates are checked against the host name, never the IP

    def _refusal(self, address: IPAddress) -> str | None:
        return None if self._settings.allow_private_addresses else self._policy(address)

    async def checked_address(self, url: httpx.URL) -> IPAddress:
        """The address to connect to; the host is refused if any of its addresses is."""
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await self._addresses(host, port)
        # All of them, not just the one used: a name that also points inward is refused.
        for address in addresses:
            reason = self._refusal(address)
            if reason is not None:
                where = repr(host) if str(address) == host else f"{host!r} ({address})"
                raise FetchRefused(f"not fetching {where}: {reason}; {self._private_hint}")
        return addresses[0]

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass  # a name, not an address literal
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise FetchFailed(f"could not resolve {host!r}: {exc}") from None
        if not addresses:
            raise FetchFailed(f"{host!r} resolved to no address")
        return addresses

    async def fetch(
        self,
        raw_url: str,
        max_bytes: int | None = None,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: str | bytes | None = None,
    ) -> FetchedPage:
        """Fetch ``raw_url``; a redirect is followed with GET and no body unless it is a
        307 or 308 (which keep the method and the body)."""
        import httpx

        settings = self._settings
        request = _Request(method.upper(), dict(headers or {}), body)
        cap = min(max_bytes or settings.max_bytes, settings.max_bytes)
        url = _parse_url(raw_url)
        try:
            async with asyncio.timeout(settings.total_timeout_s):
                for _ in range(settings.max_redirects + 1):
                    page, location, status = await self._hop(url, cap, request)
                    if page is not None:
                        return page
                    assert location is not None
                    if status not in (307, 308):
                        request = _Request("GET", request.headers, None)
                    try:
                        url = _checked_url(url.join(location))
                    except httpx.InvalidURL as exc:
                        raise FetchFailed(f"bad redirect location {location!r}: {exc}") from None
        except TimeoutError:
            raise FetchFailed(
                f"timed out after {settings.total_timeout_s:g} s (totalTimeoutS)"
            ) from None
        raise FetchFailed(f"stopped after {settings.max_redirects} redirects (maxRedirects)")

    async def _hop(
        self, url: httpx.URL, cap: int, request: _Request
    ) -> tuple[FetchedPage | None, str | None, int]:
        """One request: a page, or (None, location, status) for a redirect to follow."""
        import httpx

        settings = self._settings
        address = await self.checked_address(url)
        host = url.raw_host.decode("ascii")
        # Connect to the checked address; the name stays in Host and in TLS (SNI and
        # certificate check), so the request means the same as one to the name.
        pinned = url.copy_with(host=str(address))
        timeout = httpx.Timeout(
            connect=settings.connect_timeout_s,
            read=settings.read_timeout_s,
            write=settings.read_timeout_s,
            pool=settings.connect_timeout_s,
        )
        # The caller's headers first: the ones the guard depends on are set after them.
        headers = {
            **{k: v for k, v in request.headers.items() if k.lower() not in _OWN_HEADERS},
            "Host": url.netloc.decode("ascii"),
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",  # the cap counts what arrives, not a decompressed bomb
        }
        # A fresh client per hop: no connection made for one name is reused for another,
        # and trust_env=False keeps proxy variables from routing around the check.
        async with httpx.AsyncClient(
            timeout=timeout, follow_redirects=False, trust_env=False, verify=self._verify
        ) as client:
            try:
                async with client.stream(
                    request.method,
                    pinned,
                    headers=headers,
                    content=request.body,
                    extensions={"sni_hostname": host},
                ) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        return None, location, response.status_code
                    body, truncated = await _read_capped(response, cap)
                    page = FetchedPage(
                        url=str(url),
                        status=response.status_code,
                        content_type=response.headers.get("content-type", ""),
                        body=body,
                        truncated=truncated,
                        charset=response.charset_encoding,
                    )
                    return page, None, response.status_code
            except httpx.TimeoutException as exc:
                raise FetchFailed(f"timed out talking to {host!r}: {type(exc).__name__}") from None
            except httpx.HTTPError as exc:
                raise FetchFailed(
                    f"request to {host!r} failed: {type(exc).__name__}: {exc}"
                ) from None


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            # Stop reading here: the rest of the body is never downloaded.
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False
