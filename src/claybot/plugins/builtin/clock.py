"""The ``clock`` plugin: a ``current_time`` tool answering in a configured time zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator

from claybot.plugin_api import CamelModel, PluginApi, PluginDefinition, ToolContext, ToolDefinition

PLUGIN_ID = "clock"
DEFAULT_TOOL_NAME = "current_time"


class ClockSettings(CamelModel):
    timezone: str = "UTC"
    # A second clock instance (another zone) needs its own tool name.
    tool_name: str = Field(default=DEFAULT_TOOL_NAME, pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except Exception:
            raise ValueError(
                f"unknown time zone {value!r}; use an IANA name such as 'Europe/Paris'"
            ) from None
        return value


class CurrentTimeArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClockPlugin:
    def __init__(self, api: PluginApi[ClockSettings], now: Callable[[], datetime]) -> None:
        self._api = api
        self._now = now
        self._zone = ZoneInfo(api.settings.timezone)

    async def load(self) -> None:
        self._api.registrar.register_tool(
            ToolDefinition(
                name=self._api.settings.tool_name,
                description=(
                    f"The current date and time in {self._api.settings.timezone}, "
                    "as an ISO 8601 timestamp with its UTC offset."
                ),
                parameters=CurrentTimeArguments,
                run=self._current_time,
            )
        )

    async def unload(self) -> None:
        # Nothing to stop: the tool registration is undone by the manager.
        return None

    async def _current_time(self, arguments: BaseModel, context: ToolContext) -> str:
        return self._now().astimezone(self._zone).isoformat()


def clock_definition(
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> PluginDefinition[ClockSettings]:
    return PluginDefinition(
        id=PLUGIN_ID,
        name="Clock",
        description="Tells agents the current date and time in a chosen time zone.",
        settings_model=ClockSettings,
        create=lambda api: ClockPlugin(api, now),
    )
