"""The ``web`` plugin: ``fetch_url``, an HTTP GET that cannot be turned against its own machine.

An agent needs ``@network`` to fetch. The fetch itself is ClayBot's guarded fetch
(``claybot.net.guarded_fetch``, through the plugin API): every address the host
resolves to is checked (private ones are refused unless ``allowPrivateAddresses``
is set), the request goes to the checked IP, redirects are checked hop by hop,
and the body and the time are capped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claybot.plugin_api import (
    CamelModel,
    FetchFailed,
    FetchRefused,
    PluginApi,
    PluginDefinition,
    Resolve,
    ToolContext,
    ToolDefinition,
    ToolResult,
    UrlFetcher,
    resolve_host,
)

PLUGIN_ID = "web"
TOOL_NAME = "fetch_url"
NEEDS_NETWORK = (
    "fetch_url needs @network; ask with request_permission (permission '@network') first."
)


class WebSettings(CamelModel):
    allow_private_addresses: bool = False
    max_bytes: int = Field(default=1_000_000, ge=1, le=50_000_000)
    connect_timeout_s: float = Field(default=10.0, gt=0, le=300)
    read_timeout_s: float = Field(default=20.0, gt=0, le=600)
    total_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    max_redirects: int = Field(default=5, ge=0, le=20)


class FetchUrlArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, max_length=8192, description="An http:// or https:// URL.")
    maxBytes: int | None = Field(  # camelCase: the name the model sees
        default=None, ge=1, description="Stop reading the body after this many bytes."
    )


class FetchUrlTool:
    def __init__(self, fetcher: UrlFetcher, settings: WebSettings) -> None:
        self._fetcher = fetcher
        self._settings = settings

    def definition(self) -> ToolDefinition[Any]:
        return ToolDefinition(
            TOOL_NAME,
            "Fetch a web page or file over http(s) with GET and return its status, content "
            f"type and text (at most {self._settings.max_bytes} bytes). Needs @network.",
            FetchUrlArguments,
            self.run,
        )

    async def run(self, arguments: FetchUrlArguments, context: ToolContext) -> ToolResult:
        if not context.permissions.network:
            return ToolResult(NEEDS_NETWORK, is_error=True)
        cap = min(arguments.maxBytes or self._settings.max_bytes, self._settings.max_bytes)
        try:
            page = await self._fetcher.fetch(arguments.url, cap)
        except FetchRefused as exc:
            return ToolResult(f"Refused: {exc}", is_error=True)
        except FetchFailed as exc:
            return ToolResult(f"Fetch failed: {exc}", is_error=True)
        return ToolResult(page.render(cap))


class WebPlugin:
    def __init__(self, api: PluginApi[WebSettings], resolve: Resolve) -> None:
        self._api = api
        fetcher = UrlFetcher(api.settings, resolve=resolve)
        self._tool = FetchUrlTool(fetcher, api.settings)

    async def load(self) -> None:
        self._api.registrar.register_tool(self._tool.definition())

    async def unload(self) -> None:
        # Nothing to stop: each fetch opens and closes its own client.
        return None


def web_definition(resolve: Resolve = resolve_host) -> PluginDefinition[WebSettings]:
    return PluginDefinition(
        id=PLUGIN_ID,
        name="Web",
        description="fetch_url: GET a public http(s) URL (needs @network; private addresses "
        "are refused unless allowed).",
        settings_model=WebSettings,
        create=lambda api: WebPlugin(api, resolve),
    )
