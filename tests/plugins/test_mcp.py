"""The ``mcp`` plugin against a real MCP server (``mcp_echo_server.py``) on the official SDK."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from pydantic import ValidationError

from claybot.config.home import HomePaths
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.mcp_client.mapping import McpArguments, result_of, tool_name
from claybot.plugins import PluginLoadFailed
from claybot.plugins.builtin.mcp import McpSettings
from claybot.tools.base import ToolContext, ToolResult
from tests.agents.test_agents import next_event
from tests.conftest import write_settings

ECHO_SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))
CONTEXT = ToolContext("agent", "user", None)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"text": "", "toolCalls": [{"name": name, "arguments": arguments}]}


def echo_server(name: str = "echo", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [ECHO_SERVER], **extra}


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    async with asyncio.timeout(timeout_s):
        while not process_gone(pid):
            await asyncio.sleep(0.05)
    return True


async def run_tool(engine: Engine, name: str, **arguments: Any) -> ToolResult:
    tool = engine.tools.get(name)
    assert tool is not None, f"{name} is not registered: {engine.tools.names()}"
    output = await tool.run(McpArguments(arguments), CONTEXT)
    assert isinstance(output, ToolResult)
    return output


# -- pure parts -------------------------------------------------------------------------


def test_tool_names_are_namespaced_sanitised_and_short() -> None:
    assert tool_name("echo", "add") == "mcp__echo__add"
    assert tool_name("echo", "weird.name/with spaces") == "mcp__echo__weird_name_with_spaces"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")
    assert long != tool_name("server", "x" * 99)  # the hash keeps shortened names apart
    clash = tool_name("echo", "a/b", taken={"mcp__echo__a_b"})
    assert clash != "mcp__echo__a_b" and clash.startswith("mcp__echo__a_b_")
    for name in (long, clash):
        assert all(char.isalnum() or char in "_-" for char in name)


def test_results_become_text_and_errors_stay_errors() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="one"),
            mcp_types.ImageContent(data="aGk=", mime_type="image/png"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
        ]
    )
    converted = result_of(result)
    assert not converted.is_error
    assert converted.text == "one\n[image, image/png, not shown]\n[resource file:///a.txt]\ninside"
    structured = result_of(mcp_types.CallToolResult(content=[], structured_content={"n": 1}))
    assert structured.text == '{"n": 1}'
    failed = result_of(
        mcp_types.CallToolResult(content=[mcp_types.TextContent(text="bad")], is_error=True)
    )
    assert failed == ToolResult("bad", is_error=True)


def test_settings_name_what_is_missing() -> None:
    with pytest.raises(ValidationError, match="needs 'command'"):
        McpSettings.model_validate({"servers": [{"name": "a"}]})
    with pytest.raises(ValidationError, match="needs 'url'"):
        McpSettings.model_validate({"servers": [{"name": "a", "transport": "http"}]})
    with pytest.raises(ValidationError, match="unique"):
        McpSettings.model_validate({"servers": [echo_server("a"), echo_server("a")]})
    with pytest.raises(ValidationError):
        McpSettings.model_validate({"servers": [echo_server("bad name")]})
    with pytest.raises(ValidationError):
        McpSettings.model_validate({"servers": []})
    settings = McpSettings.model_validate({"servers": [echo_server(timeoutS=5)]})
    assert settings.servers[0].timeout_s == 5


# -- a real engine, a real stdio server -------------------------------------------------


async def test_agent_turn_calls_mcp_tools_and_unload_stops_the_server(paths: HomePaths) -> None:
    script = [
        call("mcp__echo__add", a=2, b=3),
        call("mcp__echo__shout", text="hello"),
        call("mcp__echo__explode"),
        call("mcp__echo__add", a="two"),
        call("mcp__echo__pid"),
        "done",
    ]
    broken = {"name": "broken", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}
    write_settings(
        paths,
        {
            "providers": [
                {"id": "s", "type": "scripted", "model": "script", "options": {"responses": script}}
            ],
            "plugins": [
                {
                    "instanceId": "mcp",
                    "pluginId": "mcp",
                    "settings": {"servers": [echo_server(), broken]},
                }
            ],
        },
    )
    engine = Engine(paths, EngineOptions(port=0))
    events: list[Event] = []
    engine.events.add_listener(events.append)
    await engine.start()
    try:
        names = engine.tools.names()
        for expected in (
            "mcp__echo__add",
            "mcp__echo__shout",
            "mcp__echo__explode",
            "mcp__echo__pid",
            "mcp__echo__sleep",
            "mcp__echo__weird_name_with_spaces",
        ):
            assert expected in names
        assert not any(name.startswith("mcp__broken__") for name in names)
        add = engine.tools.get("mcp__echo__add")
        assert add is not None
        schema = add.schema().parameters
        assert schema["properties"].keys() == {"a", "b"} and schema["required"] == ["a", "b"]
        assert add.description == "[MCP server echo] Add two integers."
        # The broken server is reported; the echo server loaded regardless.
        failed = [
            e.payload
            for e in events
            if e.type == "plugin.event" and e.payload["type"] == "mcp.server_failed"
        ]
        assert [f["payload"]["server"] for f in failed] == ["broken"]

        posted = await engine.post_inbound(InboundMessage("local", "u", "c", "go"))
        await next_event(events, "agent.outgoing", timeout_s=30)
        page = await engine.agents.histories.page(
            posted.agent_id, after=None, before=None, limit=100
        )
        results = [r["output"] for r in page.records if r["type"] == "tool_result"]
        assert [r["isError"] for r in results] == [False, False, True, True, False]
        assert results[0]["text"] == "5"
        assert results[1]["text"] == "HELLO!"
        assert "explode" in results[2]["text"]
        assert "validation error" in results[3]["text"]
        server_pid = int(results[4]["text"])
        assert not process_gone(server_pid)

        await engine.configuration.unload_plugin("mcp")
        assert await wait_gone(server_pid)
        assert not any(name.startswith("mcp__") for name in engine.tools.names())
    finally:
        await engine.stop()


async def test_a_call_past_its_timeout_is_an_error_result(engine: Engine) -> None:
    await engine.configuration.load_plugin("mcp", "mcp", {"servers": [echo_server(timeoutS=1)]})
    started = asyncio.get_running_loop().time()
    result = await run_tool(engine, "mcp__echo__sleep", seconds=30)
    assert result.is_error and "timed out" in result.text
    assert asyncio.get_running_loop().time() - started < 10
    # The session survives a timed-out call.
    assert (await run_tool(engine, "mcp__echo__add", a=1, b=1)).text == "2"
    await engine.configuration.unload_plugin("mcp")


async def test_a_server_that_dies_gives_error_results(engine: Engine) -> None:
    await engine.configuration.load_plugin("mcp", "mcp", {"servers": [echo_server(timeoutS=5)]})
    server_pid = int((await run_tool(engine, "mcp__echo__pid")).text)
    os.kill(server_pid, 9)
    await wait_gone(server_pid)
    result = await run_tool(engine, "mcp__echo__add", a=1, b=2)
    assert result.is_error and "echo" in result.text
    await engine.configuration.unload_plugin("mcp")


async def test_when_no_server_starts_the_load_is_not_ready(engine: Engine) -> None:
    missing = {"name": "missing", "command": "/nonexistent/mcp-server"}
    quits = {"name": "quits", "command": sys.executable, "args": ["-c", "pass"]}
    with pytest.raises(PluginLoadFailed) as failure:
        await engine.configuration.load_plugin("mcp", "mcp", {"servers": [missing, quits]})
    assert failure.value.kind == "not_ready"
    assert "missing" in failure.value.reason and "quits" in failure.value.reason
    assert not any(name.startswith("mcp__") for name in engine.tools.names())


async def test_a_server_that_never_answers_times_out_at_start(engine: Engine) -> None:
    silent = {
        "name": "silent",
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(60)"],
    }
    started = asyncio.get_running_loop().time()
    await engine.configuration.load_plugin(
        "mcp", "mcp", {"servers": [echo_server(), {**silent, "startTimeoutS": 1}]}
    )
    assert asyncio.get_running_loop().time() - started < 15
    assert "mcp__echo__add" in engine.tools.names()
    await engine.configuration.unload_plugin("mcp")


# -- streamable HTTP ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "http-server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, ECHO_SERVER, "http", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        for _ in range(300):
            if process.poll() is not None:
                raise RuntimeError(f"the MCP HTTP server exited: {process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


async def test_streamable_http_server(engine: Engine, http_server: str) -> None:
    settings = {
        "servers": [
            {"name": "remote", "transport": "http", "url": http_server, "headers": {"X-A": "b"}}
        ]
    }
    await engine.configuration.load_plugin("mcp", "mcp", settings)
    assert (await run_tool(engine, "mcp__remote__add", a=20, b=22)).text == "42"
    assert (await run_tool(engine, "mcp__remote__explode")).is_error
    await engine.configuration.unload_plugin("mcp")
    assert "mcp__remote__add" not in engine.tools.names()
