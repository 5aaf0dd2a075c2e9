"""Settings of the ``mcp`` plugin: the servers to connect to."""

from __future__ import annotations

from pydantic import Field, field_validator

from claybot.plugin_api import CamelModel, McpServerSettings


class McpSettings(CamelModel):
    servers: list[McpServerSettings] = Field(min_length=1)

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, servers: list[McpServerSettings]) -> list[McpServerSettings]:
        seen: set[str] = set()
        for server in servers:
            if server.name in seen:
                raise ValueError(f"two servers are named {server.name!r}; names must be unique")
            seen.add(server.name)
        return servers
