"""Which addresses a job or an agent may reach on the network: public ones only.

One rule for every way out: the guarded fetch (``fetch_url``) and the egress proxy
(a job's ``run_python``) both refuse what ``address_refusal`` names, and both
resolve a name once, through ``resolve_host``, then connect to the checked address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host name, port) -> every address it resolves to.
Resolve = Callable[[str, int], Awaitable[list[IPAddress]]]
# The reason an address must not be reached, or None when it may be.
AddressPolicy = Callable[[IPAddress], str | None]

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one routes to (mapped, 6to4, Teredo client, NAT64)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public internet address, or None if it is. Pure."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = address_refusal(embedded)
            return None if reason is None else f"it maps to {embedded}, {reason}"
        if address.is_site_local:
            return "it is a site-local address"
    checks = (
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
    )
    for flagged, kind in checks:
        if flagged:
            return f"it is a {kind} address"
    if not address.is_global:
        return "it is not a globally routable address"
    return None


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to, through the system resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    # Strip an IPv6 zone ("fe80::1%eth0"): the scope does not change what the address is.
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
