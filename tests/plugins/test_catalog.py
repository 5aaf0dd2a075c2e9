"""Third-party plugins are found through the ``claybot.plugins`` entry-point group.

Each test installs a real distribution (a ``*.dist-info`` folder and its module)
into a temporary directory on ``sys.path``, the way pip would.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from claybot.plugins import PluginCatalog
from claybot.plugins.builtin import builtin_definitions
from claybot.plugins.builtin.clock import clock_definition
from claybot.tools.base import ToolContext
from tests.plugins.conftest import Harness

WEATHER_MODULE = """
from pydantic import BaseModel

from claybot.plugins import PluginDefinition
from claybot.tools.base import ToolDefinition


class WeatherSettings(BaseModel):
    city: str


class Arguments(BaseModel):
    pass


class Weather:
    def __init__(self, api):
        self.api = api

    async def load(self):
        city = self.api.settings.city

        async def run(arguments, context):
            return f"sunny in {city}"

        self.api.registrar.register_tool(
            ToolDefinition(name="weather", description="", parameters=Arguments, run=run)
        )

    async def unload(self):
        pass


definition = PluginDefinition(
    id="weather",
    name="Weather",
    description="the weather in one city",
    settings_model=WeatherSettings,
    create=Weather,
)


def make_forecast():
    return PluginDefinition(
        id="forecast",
        name="Forecast",
        description="made by a factory",
        settings_model=Arguments,
        create=Weather,
    )


clock_clash = PluginDefinition(
    id="clock",
    name="Not the real clock",
    description="",
    settings_model=Arguments,
    create=Weather,
)

not_a_definition = 42


def returns_nonsense():
    return "nonsense"
"""

ENTRY_POINTS = """
[claybot.plugins]
weather = claybot_test_weather:definition
forecast = claybot_test_weather:make_forecast
clock = claybot_test_weather:clock_clash
number = claybot_test_weather:not_a_definition
nonsense = claybot_test_weather:returns_nonsense
missing = claybot_test_missing_module:definition
exploding = claybot_test_exploding:definition

[console_scripts]
unrelated = claybot_test_weather:definition
"""

MODULES = ("claybot_test_weather", "claybot_test_exploding", "claybot_test_missing_module")


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site-packages"
    dist_info = site / "claybot_test_weather-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: claybot-test-weather\nVersion: 1.0\n"
    )
    (dist_info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    (site / "claybot_test_weather.py").write_text(WEATHER_MODULE)
    (site / "claybot_test_exploding.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name in MODULES:
        sys.modules.pop(name, None)


def test_installed_plugins_are_discovered(installed: Path) -> None:
    catalog = PluginCatalog.discover()

    assert {"clock", "weather", "forecast"} <= set(catalog.ids())
    weather = catalog.get("weather")
    assert weather is not None and weather.name == "Weather"
    assert not catalog.is_builtin("weather")
    assert catalog.is_builtin("clock")
    described = {item["id"]: item for item in catalog.describe()}
    assert described["weather"]["settingsSchema"]["required"] == ["city"]
    assert described["forecast"]["builtin"] is False


def test_broken_entry_points_are_reported_and_do_not_stop_the_others(installed: Path) -> None:
    catalog = PluginCatalog.discover()

    problems = {problem.source.split(" =")[0]: problem.message for problem in catalog.problems}
    assert set(problems) == {"clock", "number", "nonsense", "missing", "exploding"}
    assert "ModuleNotFoundError" in problems["missing"]
    assert "boom at import" in problems["exploding"]
    assert "not a PluginDefinition" in problems["number"]
    assert "not a PluginDefinition" in problems["nonsense"]
    assert "built-in" in problems["clock"]
    assert all("claybot-test-weather 1.0" in problem.source for problem in catalog.problems)
    # The built-in wins the id.
    clock = catalog.get("clock")
    assert clock is not None and clock.name == "Clock"
    assert catalog.get("weather") is not None


async def test_a_discovered_plugin_loads_like_a_built_in(installed: Path, harness: Harness) -> None:
    harness.catalog = PluginCatalog.discover()
    manager = harness.manager()

    await manager.load("weather", settings={"city": "Lisbon"})

    tool = harness.registries.tools.get("weather")
    assert tool is not None
    context = ToolContext(agent_id="a", agent_kind="user", message_id=None)
    assert await tool.run(tool.parameters(), context) == "sunny in Lisbon"
    assert manager.configured()[0]["pluginId"] == "weather"


def test_a_failing_entry_point_listing_is_a_problem_not_a_crash() -> None:
    def explode() -> list[object]:
        raise OSError("unreadable site-packages")

    catalog = PluginCatalog.discover(source=explode)  # type: ignore[arg-type]
    assert catalog.ids() == [definition.id for definition in builtin_definitions()]
    assert "unreadable site-packages" in catalog.problems[0].message


def test_import_registers_nothing() -> None:
    import claybot.plugins.builtin.clock  # noqa: F401

    catalog = PluginCatalog()
    assert catalog.ids() == []
    assert clock_definition().id == "clock"


def test_a_definition_with_a_bad_id_is_refused() -> None:
    from claybot.plugins import PluginDefinition
    from tests.plugins.fakes import NoSettings, QuietPlugin

    with pytest.raises(ValueError, match="plugin id"):
        PluginDefinition(
            id="../etc",
            name="x",
            description="",
            settings_model=NoSettings,
            create=lambda api: QuietPlugin(),
        )
