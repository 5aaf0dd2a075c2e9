"""A third-party plugin as its author ships it: its own project, built and installed by pip.

The project has its own ``pyproject.toml`` declaring a ``claybot.plugins`` entry point,
and its module imports nothing of ClayBot but ``claybot.plugin_api``. pip builds it with
hatchling (a development dependency, so no network is needed) into a folder that a real
engine subprocess gets on its path; the plugin is then loaded through the socket API and
an agent calls the tool it registers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from tests.agents.test_subagents import call, rules_settings
from tests.conftest import EngineProcess, write_settings

pytestmark = pytest.mark.slow

PYPROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "claybot-greeter"
version = "1.0"
dependencies = ["claybot"]

[project.entry-points."claybot.plugins"]
greeter = "claybot_greeter:definition"
"""

MODULE = '''
"""A ClayBot plugin: a ``greet`` tool that greets in the configured way."""

from pydantic import BaseModel, ConfigDict

from claybot.plugin_api import (
    CamelModel,
    PluginApi,
    PluginDefinition,
    ToolContext,
    ToolDefinition,
    ToolResult,
)


class GreeterSettings(CamelModel):
    greeting: str = "Hello"


class GreetArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class Greeter:
    def __init__(self, api: PluginApi[GreeterSettings]) -> None:
        self._api = api

    async def load(self) -> None:
        self._api.registrar.register_tool(
            ToolDefinition("greet", "Greet someone by name.", GreetArguments, self._greet)
        )

    async def unload(self) -> None:
        return None

    async def _greet(self, arguments: GreetArguments, context: ToolContext) -> ToolResult:
        greeting = self._api.settings.greeting
        return ToolResult(f"{greeting}, {arguments.name}! ({self._api.instance_id})")


definition = PluginDefinition(
    id="greeter",
    name="Greeter",
    description="Greets people.",
    settings_model=GreeterSettings,
    create=Greeter,
)
'''

RULES = [
    {"match": "greet Ada", "response": call("greet", name="Ada")},
    {"match": "Bonjour, Ada!", "response": "Ada has been greeted."},
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin built from its project and installed into a folder of its own."""
    pytest.importorskip("hatchling", reason="hatchling builds the plugin; `make` installs it")
    root = tmp_path_factory.mktemp("greeter")
    project = root / "project"
    (project / "claybot_greeter").mkdir(parents=True)
    (project / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    (project / "claybot_greeter" / "__init__.py").write_text(textwrap.dedent(MODULE))
    target = root / "site-packages"
    # No index and no build isolation: nothing is downloaded; claybot (a dependency of
    # the plugin) is the engine's own, hence --no-deps.
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    offline = ["--no-index", "--no-build-isolation", "--no-deps"]
    build = subprocess.run(
        [*pip, *offline, "--target", str(target), str(project)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert (target / "claybot_greeter-1.0.dist-info" / "entry_points.txt").exists()
    return target


@pytest.fixture
def engine(paths: HomePaths, installed: Path) -> Iterator[EngineProcess]:
    write_settings(paths, {**rules_settings(RULES), "heartbeat": {"enabled": False}})
    search_path = [str(installed), *filter(None, [os.environ.get("PYTHONPATH")])]
    process = EngineProcess(paths, extra_env={"PYTHONPATH": os.pathsep.join(search_path)})
    process.start()
    yield process
    process.terminate()


def reply_to(client: httpx.Client, posted: dict[str, Any]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        history = client.get(f"/v1/engine/agents/{posted['agentId']}/history").json()
        records: list[dict[str, Any]] = history["records"]
        if any(r["type"] == "assistant_message" and r.get("text") for r in records):
            return records
        time.sleep(0.02)
    raise AssertionError(f"no reply to {posted!r}")


def test_an_installed_plugin_loads_through_the_socket_api_and_its_tool_runs(
    engine: EngineProcess,
) -> None:
    with engine.client() as client:
        catalog = {
            entry["id"]: entry for entry in client.get("/v1/engine/plugins").json()["catalog"]
        }
        assert catalog["greeter"]["builtin"] is False
        assert catalog["greeter"]["settingsSchema"]["properties"]["greeting"]["default"] == "Hello"
        assert catalog["clock"]["builtin"] is True

        loaded = client.post(
            "/v1/engine/plugins/load",
            json={"pluginId": "greeter", "settings": {"greeting": "Bonjour"}},
        )
        assert loaded.status_code == 200, loaded.text
        assert "greet" in client.get("/v1/engine/status").json()["tools"]

        posted = client.post(
            "/v1/engine/messages", json={"userId": "ann", "channelId": "c", "text": "greet Ada"}
        )
        assert posted.status_code == 202, posted.text
        records = reply_to(client, posted.json())

    [result] = [r["output"] for r in records if r["type"] == "tool_result"]
    assert (result["text"], result["isError"]) == ("Bonjour, Ada! (greeter)", False)
    assert records[-1]["type"] == "assistant_message"
    assert records[-1]["text"] == "Ada has been greeted."
