"""The relay an "egress" command runs behind, inside its own empty network namespace.

The sandbox starts it as ``<python> -I -S -c <this file> <proxy socket> <command...>``
(the engine's own interpreter, at the path the engine runs it from, which the
sandbox shows unless it lies in a hidden folder; nothing but the standard library,
so no site-packages are needed). It brings the namespace's
loopback up when it is down (``unshare --net`` leaves it down; bubblewrap brings
it up), listens on 127.0.0.1:``PORT`` there, and forks: the child relays every
connection to the egress proxy's Unix socket, and the parent becomes the command,
with the proxy variables set. The port is bound before the command starts, so its
first connection waits in the backlog instead of failing.

Nothing here decides anything: the proxy, outside, checks every destination, and a
command that talks to the socket itself meets the same proxy. When the loopback
cannot come up the command does not run: it is never given another network.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys
from typing import TYPE_CHECKING

# asyncio is imported by the relay alone, after the fork: it takes a third of a second
# on a busy machine, which the command would otherwise wait for.
if TYPE_CHECKING:
    import asyncio

HOST = "127.0.0.1"
PORT = 3128  # the usual proxy port; the namespace is new, so nothing else holds it
EXIT_NO_RELAY = 125  # the relay could not start: the command did not run
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")  # empty: every destination goes through it
CHUNK = 65536

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFREQ = "16sH22x"  # struct ifreq: the interface name, then ifr_flags (40 bytes in all)


def loopback_up() -> None:
    """``lo`` up in this namespace (needs CAP_NET_ADMIN over it, which the namespace's
    creator has: root, or the user namespace ``unshare -rn`` makes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        current = fcntl.ioctl(control, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
        flags = struct.unpack(IFREQ, current)[1]
        if not flags & IFF_UP:
            fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def proxy_environment(environ: dict[str, str]) -> dict[str, str]:
    url = f"http://{HOST}:{PORT}"
    env = dict(environ)
    env.update(dict.fromkeys(PROXY_VARIABLES, url))
    env.update(dict.fromkeys(NO_PROXY_VARIABLES, ""))
    return env


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, other: asyncio.StreamWriter
) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close is passed on: the other way may go on
    except OSError:
        writer.close()  # one side broke: so does the whole connection
        other.close()


async def _serve(listener: socket.socket, proxy: str) -> None:
    import asyncio

    async def relay(client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            proxy_reader, upstream = await asyncio.open_unix_connection(proxy)
        except OSError:
            client.close()
            return
        try:
            await asyncio.gather(
                _pipe(client_reader, upstream, client), _pipe(proxy_reader, client, upstream)
            )
        finally:
            client.close()
            upstream.close()

    server = await asyncio.start_server(relay, sock=listener)
    await server.serve_forever()


def main(argv: list[str]) -> None:
    proxy, command = argv[0], argv[1:]
    try:
        loopback_up()
        listener = socket.create_server((HOST, PORT), backlog=128)
    except OSError as exc:
        sys.stderr.write(
            f"claybot egress relay: the command's own network namespace has no usable "
            f"loopback ({exc}), so it cannot reach the egress proxy; the command was not "
            "run (it is never given the host's network instead)\n"
        )
        sys.exit(EXIT_NO_RELAY)
    if os.fork() == 0:
        # The relay holds none of the command's output pipes, so they close with it.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            import asyncio

            asyncio.run(_serve(listener, proxy))
        finally:
            os._exit(0)
    listener.close()
    os.execvpe(command[0], command, proxy_environment(dict(os.environ)))


if __name__ == "__main__":
    main(sys.argv[1:])
