"""Secrets in settings reach no response, event or log line; the engine still uses them."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import httpx
import pytest

from claybot.engine.engine import Engine
from claybot.engine.logging_setup import JsonFormatter
from claybot.kernel.events import Event
from claybot.mcp_client.mapping import McpArguments
from claybot.tools.base import ToolContext, ToolResult
from tests.plugins.test_mcp import ECHO_SERVER

SECRET = "s3cret"  # part of every secret value below, so one search finds any of them
MCP_SERVER = {
    "name": "echo",
    "command": sys.executable,
    "args": [ECHO_SERVER, "--token", f"{SECRET}-arg"],  # the echo server ignores its args
    "env": {"TOKEN": SECRET, "PLAIN": "visible"},
    "headers": {"X-Custom": f"{SECRET}-header"},
}
PROVIDER = {
    "id": "vendor",
    "type": "scripted",
    "model": "echo",
    "options": {
        "apiKey": f"sk-{SECRET}-key",
        "baseUrl": f"https://user:{SECRET}-pw@llm.example/v1",
        "defaultHeaders": {"Authorization": f"Bearer {SECRET}-bearer"},
        "maxTokens": 100,
    },
}


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.is_success, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_plugin_and_provider_secrets_are_redacted_everywhere(
    engine: Engine, api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    events: list[Event] = []
    engine.events.add_listener(events.append)
    responses: list[httpx.Response] = []

    async def call(method: str, path: str, body: Any = None) -> dict[str, Any]:
        response = await api.request(method, path, json=body)
        responses.append(response)
        return ok(response)

    loaded = await call(
        "POST",
        "/v1/engine/plugins/load",
        {"pluginId": "mcp", "instanceId": "tools", "settings": {"servers": [MCP_SERVER]}},
    )
    assert loaded["plugin"]["id"] == "tools"
    await call("POST", "/v1/engine/providers", PROVIDER)
    listing = await call("GET", "/v1/engine/plugins")
    providers = await call("GET", "/v1/engine/providers")
    await call("GET", "/v1/engine/status")
    await call("POST", "/v1/engine/providers/vendor/default")
    await call("POST", "/v1/engine/plugins/unload", {"instanceId": "tools"})
    await call("GET", "/v1/engine/plugins")
    await call("DELETE", "/v1/engine/providers/vendor")

    # Listings still say what is configured: names, and the values that are not secret.
    server = next(e for e in listing["configured"] if e["instanceId"] == "tools")
    shown = server["settings"]["servers"][0]
    assert shown["env"] == {"TOKEN": "[redacted]", "PLAIN": "[redacted]"}
    assert shown["headers"] == {"X-Custom": "[redacted]"}
    assert shown["args"] == [ECHO_SERVER, "--token", "[redacted]"]
    assert shown["command"] == sys.executable
    vendor = next(p for p in providers["providers"] if p["id"] == "vendor")
    assert vendor["options"] == {
        "apiKey": "[redacted]",
        "baseUrl": "https://user:[redacted]@llm.example/v1",
        "defaultHeaders": {"Authorization": "[redacted]"},
        "maxTokens": 100,
    }

    for response in responses:
        assert SECRET not in response.text, (response.request.url, response.text)
    # plugin.event is the MCP server connecting.
    assert {"plugin.event", "plugin.loaded", "plugin.unloaded"} <= {e.type for e in events}
    for event in events:
        assert SECRET not in json.dumps(event.to_dict()), event
    formatter = JsonFormatter()
    assert caplog.records  # the plugin and provider changes were logged
    for record in caplog.records:
        assert SECRET not in formatter.format(record), formatter.format(record)


async def test_the_engine_still_runs_with_the_real_values(
    engine: Engine, api: httpx.AsyncClient
) -> None:
    settings = {"servers": [MCP_SERVER]}
    ok(await api.post("/v1/engine/plugins/load", json={"pluginId": "mcp", "settings": settings}))
    ok(await api.post("/v1/engine/providers", json=PROVIDER))
    stored = json.loads(engine.paths.settings.read_text())
    assert stored["plugins"][0]["settings"]["servers"][0]["env"]["TOKEN"] == SECRET
    vendor = next(p for p in stored["providers"] if p["id"] == "vendor")
    assert vendor["options"]["apiKey"] == f"sk-{SECRET}-key"
    tool = engine.tools.get("mcp__echo__getenv")
    assert tool is not None
    output = await tool.run(McpArguments({"name": "TOKEN"}), ToolContext("agent", "user", None))
    assert output == ToolResult(SECRET)
    # Loading again after an unload takes the stored settings, not the redacted view.
    ok(await api.post("/v1/engine/plugins/unload", json={"instanceId": "mcp"}))
    ok(await api.post("/v1/engine/plugins/load", json={"pluginId": "mcp"}))
    tool = engine.tools.get("mcp__echo__getenv")
    assert tool is not None
    output = await tool.run(McpArguments({"name": "TOKEN"}), ToolContext("agent", "user", None))
    assert output == ToolResult(SECRET)
