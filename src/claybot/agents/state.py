"""``state.json``: the mutable part of an agent (seed 001)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from claybot.permissions.model import Permissions


class ProviderSelection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    providerId: str
    model: str | None = None


class TokenTotals(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: int = 0
    output: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    total: int = 0


class AgentState(BaseModel):
    # Kept permissive (extra="allow") so a newer engine's fields survive an older one.
    # Only the keys go through pydantic-core's string cache: with the values too, each
    # load left its agents' ids and message ids in that process-wide cache (16,384
    # strings), small objects spread over the load's memory that kept it from going back
    # to the system (bench/agents.py --memory --tracemalloc showed them growing).
    model_config = ConfigDict(extra="allow", cache_strings="keys")
    permissions: Permissions = Field(default_factory=Permissions)
    provider: ProviderSelection | None = None
    routing: dict[str, str] = Field(default_factory=dict)
    tokens: TokenTotals = Field(default_factory=TokenTotals)
    createdAt: int
    updatedAt: int
