"""How to reach one MCP server: the mcp plugin's settings and the job registry's rows
both become one of these."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from claybot.config.redaction import SECRET
from claybot.config.settings import CamelModel

SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"


class McpServerSettings(CamelModel):
    # Part of every tool name (mcp__<name>__<tool>), so kept short and plain.
    name: str = Field(pattern=SERVER_NAME_PATTERN)
    transport: Literal["stdio", "http"] = "stdio"
    # stdio: the command to start; it inherits only a safe part of the engine's environment.
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    # Secret: tokens travel here. Listings show the names, never the values.
    env: dict[str, str] = Field(default_factory=dict, json_schema_extra=SECRET)
    cwd: str | None = None
    # http: a streamable HTTP endpoint, such as http://127.0.0.1:8000/mcp.
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, json_schema_extra=SECRET)
    # Bounds every tool call.
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    # Bounds starting: launch, connect and list the tools (a cold Python server needs seconds).
    start_timeout_s: float = Field(default=30.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _transport_needs(self) -> McpServerSettings:
        if self.transport == "stdio" and self.command is None:
            raise ValueError(f"server {self.name!r}: a stdio server needs 'command'")
        if self.transport == "http":
            if self.url is None:
                raise ValueError(f"server {self.name!r}: an http server needs 'url'")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"server {self.name!r}: 'url' must be http:// or https://")
        return self
