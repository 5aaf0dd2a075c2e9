"""``GET /v1/engine/status``: what the engine runs, projected from its parts (seed 000)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from claybot import __version__
from claybot.agents.system import AgentSystem
from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.connectors.webchat import WEBCHAT_CONNECTOR
from claybot.engine.keystore import DeferredApiKeyStore
from claybot.kernel.supervise import SideTaskJson
from claybot.plugin_api.registries import BUILTIN_PLUGIN_ID, ConnectorSummary, ImageProviderSummary
from claybot.plugins import PluginManager, Registries
from claybot.plugins.manager import PluginFailureSummary, PluginSummary
from claybot.providers.configured import ConfiguredProviders
from claybot.sandbox import Sandbox
from claybot.sandbox.exec import SandboxStatus
from claybot.tools.base import ToolRegistry


@dataclass(frozen=True)
class StatusSources:
    """The parts of the engine the status reads (``agents`` only while it runs)."""

    paths: HomePaths
    settings: Settings
    started_at: datetime
    tcp_port: int | None
    plugins: PluginManager
    providers: ConfiguredProviders
    registries: Registries
    sandbox: Sandbox
    tools: ToolRegistry
    key_store: DeferredApiKeyStore | None
    agents: AgentSystem | None


class TcpInfo(TypedDict):
    host: str
    port: int | None


class ProviderInfo(TypedDict):
    id: str
    name: str
    label: str
    type: str
    enabled: bool
    model: str | None


class InferenceProviderInfo(TypedDict):
    id: str
    name: str
    label: str
    model: str


class DatabaseInfo(TypedDict):
    ready: bool
    error: str | None


class AgentCounts(TypedDict):
    total: int
    loaded: int
    pendingItems: int
    problems: list[dict[str, str]]
    stuck: list[dict[str, str | int]]


class StatusReport(TypedDict):
    """What the engine runs (``wire.status.EngineStatus`` without ``ok`` and ``status``),
    in the order the answer has always had. The lists lower layers build (connectors,
    image providers, the sandbox) are typed there."""

    version: str
    pid: int
    home: str
    startedAt: str
    socketPath: str
    tcp: TcpInfo
    plugins: list[PluginSummary]
    connectors: list[ConnectorSummary]
    providers: list[ProviderInfo]
    inferenceProviders: list[InferenceProviderInfo]
    imageProviders: list[ImageProviderSummary]
    database: DatabaseInfo
    providerFailures: dict[str, str]
    sandbox: SandboxStatus
    pluginFailures: list[PluginFailureSummary]
    tools: list[str]
    agents: AgentCounts
    sideTasks: list[SideTaskJson]


class SeedStatus(TypedDict):
    plugins: list[PluginSummary]
    providers: list[str]
    connectors: list[ConnectorSummary]
    inferenceProviders: list[InferenceProviderInfo]
    imageProviders: list[ImageProviderSummary]
    tools: list[str]


class StatusView:
    """The engine's status as the doors read it: built from its parts as they are now."""

    def __init__(self, sources: Callable[[], StatusSources]) -> None:
        self._sources = sources

    def status(self) -> StatusReport:
        return engine_status(self._sources())

    @property
    def started_at(self) -> datetime:
        return self._sources().started_at


def engine_status(engine: StatusSources) -> StatusReport:
    agents = engine.agents
    keys = engine.key_store
    started_at = engine.started_at.isoformat().replace("+00:00", "Z")
    # ``name`` and ``label`` mean the same in both provider lists: its id, and how it
    # shows itself (kind and model) as built, or as it would be built.
    labels = {p.id: p.label for p in engine.providers.router.providers}
    return {
        "version": __version__,
        "pid": os.getpid(),
        "home": str(engine.paths.home),
        "startedAt": started_at,
        "socketPath": str(engine.paths.socket),
        "tcp": {"host": engine.settings.engine.host, "port": engine.tcp_port},
        "plugins": engine.plugins.plugin_summaries(),
        "connectors": [
            *_builtin_connectors(started_at),
            *engine.plugins.connector_summaries(),
        ],
        "providers": [
            {
                "id": p.id,
                "name": p.id,
                "label": labels.get(p.id) or _unbuilt_label(engine, p.provider_type, p.model),
                "type": p.provider_type,
                "enabled": p.enabled,
                "model": p.model,
            }
            for p in engine.settings.providers
        ],
        "inferenceProviders": [
            {"id": p.id, "name": p.id, "label": p.label, "model": p.model}
            for p in engine.providers.router.providers
        ],
        "imageProviders": engine.registries.images.summaries(),
        "database": {
            "ready": keys.ready if keys else False,
            "error": keys.error if keys else None,
        },
        "providerFailures": engine.providers.failures,
        "sandbox": engine.sandbox.status(),
        "pluginFailures": engine.plugins.failure_summaries(),
        "tools": engine.tools.names(),
        "agents": {
            "total": len(agents.directory) if agents else 0,
            "loaded": agents.loaded_count if agents else 0,
            "pendingItems": agents.pending_count() if agents else 0,
            "problems": agents.listings.problems() if agents else [],
            "stuck": agents.listings.stuck() if agents else [],
        },
        "sideTasks": [task.to_dict() for task in agents.side_tasks.status()] if agents else [],
    }


def seed_status(status: StatusReport) -> SeedStatus:
    """Seed 000's status object, as the original ClayBot's clients read it from the
    answer's ``status`` (its dashboard shows these lists; its CLI's ``providers``
    command reads ``providers`` as the ids of the providers the engine runs and looks
    each up there). The lists are those of ``status`` itself, but ``providers``: the ids
    of the providers that were built, where ``status["providers"]`` describes every
    configured one."""
    built = [p["id"] for p in (*status["inferenceProviders"], *status["imageProviders"])]
    return {
        "plugins": status["plugins"],
        "providers": list(dict.fromkeys(built)),
        "connectors": status["connectors"],
        "inferenceProviders": status["inferenceProviders"],
        "imageProviders": status["imageProviders"],
        "tools": status["tools"],
    }


def _unbuilt_label(engine: StatusSources, provider_type: str, model: str | None) -> str:
    """A disabled provider's label, or one that failed to build: its kind and model."""
    kinds = {kind.type: kind.label for kind in engine.registries.providers.types()}
    kind = kinds.get(provider_type, provider_type)
    return f"{kind} ({model})" if model else kind


def _builtin_connectors(loaded_at: str) -> list[ConnectorSummary]:
    """The connectors that are views of the event stream rather than plugins."""
    return [
        {"id": connector_id, "pluginId": BUILTIN_PLUGIN_ID, "name": name, "loadedAt": loaded_at}
        for connector_id, name in (
            ("local", "Local (CLI and socket API)"),
            (WEBCHAT_CONNECTOR, "Web chat (dashboard)"),
        )
    ]
