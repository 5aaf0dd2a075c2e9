"""A real MCP server for the tests, on the official SDK: ``python mcp_echo_server.py [http PORT]``.

Without arguments it speaks stdio; ``http PORT`` serves streamable HTTP on
127.0.0.1:PORT at ``/mcp``.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper() + "!"


@server.tool()
def explode(reason: str = "kaboom") -> str:
    """Always raises."""
    raise ValueError(reason)


@server.tool()
def getenv(name: str) -> str:
    """A variable of this server's environment ("" if unset)."""
    return os.environ.get(name, "")


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool(name="weird.name/with spaces")
def weird() -> str:
    """A tool whose name needs sanitising."""
    return "weird ok"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
