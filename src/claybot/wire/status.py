"""``GET /v1/engine/status``: the engine, with display names for what it runs (seed 000)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from claybot.wire.agents import AgentProblem, StuckAgent
from claybot.wire.base import Answer, Ok
from claybot.wire.plugins import ConnectorSummary, PluginFailure, PluginSummary


class TcpListener(Answer):
    host: str
    port: int | None = Field(description="null when the TCP listener is not running")


class ProviderSummary(Answer):
    """A configured inference provider, in priority order (seed 000, plus its state)."""

    id: str
    name: str = Field(description="Its id, as in `inferenceProviders`")
    label: str = Field(
        description="How it shows itself, as in `inferenceProviders`: its kind and model"
    )
    type: str = Field(description="The provider type (`openai`, `anthropic`, `local`, ...)")
    enabled: bool
    model: str | None


class InferenceProviderSummary(Answer):
    """A provider the engine built and sends turns to."""

    id: str
    name: str
    label: str
    model: str


class ImageProviderSummary(Answer):
    """An image provider (seed 000's ProviderSummary)."""

    id: str
    name: str
    label: str


class DatabaseStatus(Answer):
    ready: bool
    error: str | None


class SandboxStatus(Answer):
    """Whether commands (exec, gates) are confined, and by what."""

    confined: bool
    backend: Literal["bwrap"] | None
    bwrap: str | None = Field(description="The bubblewrap binary")
    problem: str
    processLimit: str | None
    unconfined: list[str] = Field(description="Who runs unconfined (settings: sandbox)")
    summary: str


class AgentCounts(Answer):
    total: int
    loaded: int
    pendingItems: int
    problems: list[AgentProblem]
    stuck: list[StuckAgent]


class SideTaskStatus(Answer):
    """A supervised background task of the engine (the idle sweeper, the state flush, ...)."""

    name: str
    running: bool
    restarts: int = Field(description="Times it failed and was started again")
    lastError: str | None
    lastFailureAt: str | None = Field(description="ISO 8601, UTC")


class SeedStatus(Answer):
    """Seed 000's status object, under ``status``: what the original ClayBot's dashboard
    and CLI read. The lists are those beside it, but ``providers``."""

    plugins: list[PluginSummary]
    providers: list[str] = Field(
        description="The ids of the providers the engine built (inference, then image): "
        "as the original CLI reads them. The top-level `providers` describes every "
        "configured one"
    )
    connectors: list[ConnectorSummary]
    inferenceProviders: list[InferenceProviderSummary]
    imageProviders: list[ImageProviderSummary]
    tools: list[str]


class EngineStatus(Ok):
    version: str
    pid: int
    home: str
    startedAt: str = Field(description="ISO 8601, UTC")
    socketPath: str
    tcp: TcpListener
    plugins: list[PluginSummary]
    connectors: list[ConnectorSummary]
    providers: list[ProviderSummary]
    inferenceProviders: list[InferenceProviderSummary]
    imageProviders: list[ImageProviderSummary]
    database: DatabaseStatus
    providerFailures: dict[str, str] = Field(description="Why a provider could not be built")
    sandbox: SandboxStatus
    pluginFailures: list[PluginFailure]
    tools: list[str]
    agents: AgentCounts
    sideTasks: list[SideTaskStatus]
    status: SeedStatus = Field(
        description="Seed 000's answer was `{ok, status}`: its clients read the status here"
    )
