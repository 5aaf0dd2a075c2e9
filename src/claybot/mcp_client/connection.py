"""One MCP server, kept connected by a task of its own.

The SDK's transports are anyio context managers whose cancel scopes must be
entered and exited in the same task, so each server gets a long-lived task that
opens the client, lists the tools and then waits for ``close()``. Agents' tool
calls go through the open session from their own tasks, which the SDK allows.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import claybot
from claybot.mcp_client.settings import McpServerSettings

log = logging.getLogger(__name__)

CLOSE_GRACE_S = 10.0  # the SDK itself bounds a stdio server's exit to a few seconds
MAX_TOOL_PAGES = 100  # a server whose listing never ends cannot hang the load
HTTP_STREAM_READ_S = 300.0  # a streamed response may stay open this long between events
CLIENT_INFO = mcp_types.Implementation(name="claybot", version=claybot.__version__)


class McpServerError(Exception):
    """The server cannot be used: it did not start, or it is no longer connected."""


def describe(error: BaseException) -> str:
    """The innermost useful message of ``error``: anyio wraps failures in groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class McpConnection:
    def __init__(self, settings: McpServerSettings, log_dir: Path) -> None:
        self.settings = settings
        self.name = settings.name
        self._log_dir = log_dir
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def start(self) -> list[mcp_types.Tool]:
        """Connect and list the tools; ``McpServerError`` if that fails or takes too long."""
        ready: asyncio.Future[list[mcp_types.Tool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name=f"mcp-server-{self.name}")
        timeout_s = self.settings.start_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise McpServerError(f"did not start within {timeout_s:g} s (startTimeoutS)") from None
        except McpServerError:
            await self.close()
            raise
        except Exception as exc:
            await self.close()
            raise McpServerError(describe(exc)) from exc
        except BaseException:  # cancelled: the server must not outlive the load
            await self.close()
            raise

    async def _run(self, ready: asyncio.Future[list[mcp_types.Tool]]) -> None:
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = await stack.enter_async_context(
                    Client(
                        transport,
                        read_timeout_seconds=self.settings.timeout_s,
                        client_info=CLIENT_INFO,
                    )
                )
                tools = await _list_tools(client)
                self._client = client
                ready.set_result(tools)
                await self._stop.wait()
                self._client = None  # calls from now on are refused, not sent to a closing pipe
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.warning(
                    "MCP server %r disconnected: %s; its tools fail until the plugin is reloaded",
                    self.name,
                    describe(exc),
                    extra={"action": "mcp.server_lost", "server": self.name},
                )
        finally:
            self._client = None

    async def _transport(self, stack: AsyncExitStack) -> Transport:
        settings = self.settings
        if settings.transport == "http":
            assert settings.url is not None
            http_client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=settings.headers,
                    timeout=httpx2.Timeout(
                        settings.timeout_s, read=max(settings.timeout_s, HTTP_STREAM_READ_S)
                    ),
                )
            )
            return streamable_http_client(settings.url, http_client=http_client)
        assert settings.command is not None
        # The server's stderr goes to a log file of its own, not into the engine's output.
        errlog = stack.enter_context((self._log_dir / f"{self.name}.stderr.log").open("a"))
        parameters = StdioServerParameters(
            command=settings.command,
            args=settings.args,
            env=settings.env or None,
            cwd=settings.cwd,
        )
        return stdio_client(parameters, errlog=errlog)

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        client = self._client
        if client is None:
            raise McpServerError(f"MCP server {self.name!r} is not connected")
        timeout_s = self.settings.timeout_s
        try:
            # The SDK times the call out itself; this only backs it up.
            async with asyncio.timeout(timeout_s + 5):
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
        except TimeoutError:
            raise McpServerError(f"no answer within {timeout_s:g} s (timeoutS)") from None

    async def close(self) -> None:
        """Stop the server (or the attempt to start it); safe to call more than once."""
        task = self._task
        if task is None or task.done():
            return
        self._stop.set()
        if self._client is None:
            task.cancel()  # still connecting: nothing to wind down gracefully
        done, _ = await asyncio.wait({task}, timeout=CLOSE_GRACE_S)
        if not done:
            log.warning(
                "MCP server %r did not stop in %g s; cancelling",
                self.name,
                CLOSE_GRACE_S,
                extra={"action": "mcp.close_timeout", "server": self.name},
            )
            task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_GRACE_S)


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools
