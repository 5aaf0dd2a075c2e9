"""Plugins, built-in and third-party, are found through the ``claybot.plugins`` entry points.

Each test installs a real distribution (a ``*.dist-info`` folder and its module)
into a temporary directory on ``sys.path``, the way pip would.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from claybot.plugin_api import ToolContext
from claybot.plugins import PluginCatalog
from claybot.plugins.builtin.clock import clock_definition
from tests.installed_metadata import declared_entry_points
from tests.plugins.conftest import Harness

BUILTINS = ["clock", "mcp", "shell", "telegram", "web"]

WEATHER_MODULE = """
from pydantic import BaseModel

from claybot.plugin_api import PluginDefinition, ToolDefinition


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


def install(site: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    dist_info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for module, text in modules.items():
        (site / f"{module}.py").write_text(text)


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site-packages"
    install(
        site,
        "claybot-test-weather",
        ENTRY_POINTS,
        {
            "claybot_test_weather": WEATHER_MODULE,
            "claybot_test_exploding": "raise RuntimeError('boom at import')\n",
        },
    )
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


def test_the_built_ins_are_entry_points_of_claybot_itself() -> None:
    catalog = PluginCatalog.discover()

    assert sorted(declared_entry_points()) == BUILTINS
    assert catalog.problems == []
    assert [plugin_id for plugin_id in BUILTINS if catalog.is_builtin(plugin_id)] == BUILTINS
    described = {item["id"]: item for item in catalog.describe()}
    assert all(described[plugin_id]["builtin"] for plugin_id in BUILTINS)


def test_a_damaged_distribution_is_a_problem_and_hides_nothing_else(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # importlib.metadata.entry_points() fails as a whole on this one.
    damaged = tmp_path / "damaged"
    install(damaged, "claybot-test-damaged", "[claybot.plugins]\nno equals sign\n", {})
    monkeypatch.syspath_prepend(str(damaged))

    catalog = PluginCatalog.discover()

    [problem] = [p for p in catalog.problems if "claybot-test-damaged" in p.source]
    assert "unreadable" in problem.message
    assert {*BUILTINS, "weather", "forecast"} <= set(catalog.ids())
    assert catalog.is_builtin("clock")


def test_the_first_copy_of_a_distribution_on_the_path_wins(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadowing = tmp_path / "shadowing"
    install(
        shadowing,
        "claybot-test-weather",
        "[claybot.plugins]\nforecast = claybot_test_weather:make_forecast\n",
        {},
    )
    monkeypatch.syspath_prepend(str(shadowing))

    catalog = PluginCatalog.discover()

    assert catalog.get("forecast") is not None
    assert catalog.get("weather") is None  # declared by the shadowed copy only
    assert not any("claybot-test-weather" in problem.source for problem in catalog.problems)


def test_a_failing_listing_is_a_problem_not_a_crash() -> None:
    def explode() -> list[object]:
        raise OSError("unreadable site-packages")

    catalog = PluginCatalog.discover(source=explode)  # type: ignore[arg-type]
    assert catalog.ids() == []
    assert "unreadable site-packages" in catalog.problems[0].message


def test_import_registers_nothing() -> None:
    import claybot.plugins.builtin.clock  # noqa: F401

    catalog = PluginCatalog()
    assert catalog.ids() == []
    assert clock_definition().id == "clock"


def test_a_definition_with_a_bad_id_is_refused() -> None:
    from claybot.plugin_api import PluginDefinition
    from tests.plugins.fakes import NoSettings, QuietPlugin

    with pytest.raises(ValueError, match="plugin id"):
        PluginDefinition(
            id="../etc",
            name="x",
            description="",
            settings_model=NoSettings,
            create=lambda api: QuietPlugin(),
        )
