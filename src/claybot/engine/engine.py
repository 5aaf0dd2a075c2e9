"""The engine: wires stores, agents, providers, plugins and listeners together.

``Engine.start`` / ``Engine.stop`` are the only startup and shutdown path. The doors
never hold the engine: they get its services by type (``services``, ``_services()``).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from claybot.agents.control import AgentConversationControl
from claybot.agents.system import AgentSystem
from claybot.agents.webchat import WebchatConversations
from claybot.config.home import HomePaths
from claybot.config.settings import FileSettings, Settings
from claybot.config.store import ConfigStore
from claybot.connectors.base import InboundMessage, PostedMessage
from claybot.connectors.outbox import ConnectorOutbox
from claybot.cron.scheduler import CronScheduler
from claybot.db.location import database_url
from claybot.durable.group_commit import GroupCommitWriter
from claybot.engine.address import EngineAddress
from claybot.engine.assembly import Running, build_agents, build_schedulers
from claybot.engine.configuration import LiveConfiguration
from claybot.engine.feeds import ConversationFeed, EngineFeed
from claybot.engine.file_collection import collect_forever
from claybot.engine.jobs_host import JobsHost
from claybot.engine.keystore import BackgroundDatabase, DeferredApiKeyStore
from claybot.engine.metrics import EngineMetrics
from claybot.engine.options import EngineOptions
from claybot.engine.status import StatusReport, StatusSources, StatusView
from claybot.files.store import FileStore
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.jobs.service import JobService
from claybot.kernel.collector import pace_collector
from claybot.kernel.events import EventBus
from claybot.kernel.services import ServiceRegistry
from claybot.permissions.requests import PermissionBroker
from claybot.plugins import PluginCatalog, PluginManager, Registries
from claybot.proactive.service import ProactiveService
from claybot.providers.admin import ProviderAdmin
from claybot.providers.configured import ConfiguredProviders
from claybot.providers.registry import ProviderRegistry, builtin_provider_types
from claybot.providers.router import InferenceRouter
from claybot.sandbox import Sandbox
from claybot.tools.base import ToolRegistry

__all__ = ["Engine", "EngineOptions", "Running"]

log = logging.getLogger(__name__)


class Engine:
    def __init__(self, paths: HomePaths, options: EngineOptions | None = None) -> None:
        self.paths = paths
        self.options = options or EngineOptions()
        self.config = ConfigStore(paths)
        self.events = EventBus()
        self.metrics = EngineMetrics(self.events, pending=self._pending, jobs=self._job_counts)
        self.writer = GroupCommitWriter(
            durable=self.options.durable, journal=paths.agents / "inbox.wal", root=paths.home
        )
        self.provider_registry = ProviderRegistry(builtin_provider_types())
        self.tools = ToolRegistry()
        self.registries = Registries(tools=self.tools, providers=self.provider_registry)
        self.catalog = self.options.catalog or PluginCatalog.discover()
        # One sandbox for every command agents run (exec and gates): probed once at start.
        self.sandbox = Sandbox(paths.home, environ=self.options.env)
        self.conversations = AgentConversationControl()  # what connectors may ask
        self.outbox = ConnectorOutbox(self.registries.connectors)
        self.files = FileStore(paths.files, FileSettings())  # its settings are read at start
        self.plugins = PluginManager(
            self.catalog,
            self.registries,
            self.config,
            self.events,
            paths,
            self.post_inbound,
            control=self.conversations,
            sandbox=self.sandbox,
            files=self.files,
        )
        self.providers = ConfiguredProviders(
            self.provider_registry, self.options.env, self.events, self.metrics
        )
        self.configuration = LiveConfiguration(
            self.config, self.events, self.plugins, self.providers
        )
        self.started_at = datetime.now(UTC)
        self.tcp_port: int | None = None
        self.status_view = StatusView(self._status_sources)
        self.services = self._services()
        self._running: Running | None = None
        self.database = BackgroundDatabase(database_url(paths, self.options.env))
        self.jobs = JobsHost(
            self.database, self.events, self.sandbox, paths.home / "jobs", self.options.egress
        )
        self._sandbox_probe: asyncio.Task[Any] | None = None
        self._file_collection: asyncio.Task[None] | None = None

    def _services(self) -> ServiceRegistry:
        """What the doors (the API, the dashboard) may reach, each by its type."""
        services = ServiceRegistry()
        services.provide(LiveConfiguration, lambda: self.configuration)
        services.provide(EngineMetrics, lambda: self.metrics)
        services.provide(FileStore, lambda: self.files)
        services.provide(DeferredApiKeyStore, lambda: self.keys)
        admin = ProviderAdmin(self.configuration, self.providers, self.options.env)
        services.provide(ProviderAdmin, lambda: admin)
        services.provide(PluginManager, lambda: self.plugins)
        services.provide(StatusView, lambda: self.status_view)
        services.provide(HomePaths, lambda: self.paths)
        services.provide(EventBus, lambda: self.events)
        services.provide(JobsHost, lambda: self.jobs)
        address = EngineAddress(lambda: self.settings.engine.host, lambda: self.tcp_port)
        services.provide(EngineAddress, lambda: address)
        # While the engine runs (before start and after stop there is none: a 500).
        services.provide(AgentSystem, lambda: self.agents)
        services.provide(PermissionBroker, lambda: self.permissions)
        services.provide(CronScheduler, lambda: self.cron)
        services.provide(HeartbeatScheduler, lambda: self.heartbeat)
        services.provide(ProactiveService, lambda: self.proactive)
        # The job database opens in the background: the service waits for it per call.
        services.provide(JobService, lambda: JobService(self.jobs.database, self.jobs.workroot))
        services.provide(
            EngineFeed,
            lambda: EngineFeed(self.events, self.status, self.agents, self.cron, self.heartbeat),
        )
        services.provide(
            ConversationFeed,
            lambda: ConversationFeed(self.events, self.agents, self.permissions),
        )
        services.provide(
            WebchatConversations, lambda: WebchatConversations(self.agents, self.permissions)
        )
        return services

    @property
    def settings(self) -> Settings:
        """Read-only: a change goes through ``configuration``, which rebuilds the providers."""
        return self.configuration.settings

    @property
    def running(self) -> Running:
        if self._running is None:
            raise RuntimeError("the engine is not started")
        return self._running

    @property
    def started(self) -> bool:
        return self._running is not None

    @property
    def agents(self) -> AgentSystem:
        return self.running.agents

    @property
    def permissions(self) -> PermissionBroker:
        return self.running.permissions

    @property
    def cron(self) -> CronScheduler:
        return self.running.cron

    @property
    def heartbeat(self) -> HeartbeatScheduler:
        return self.running.heartbeat

    @property
    def proactive(self) -> ProactiveService:
        return self.running.proactive

    # -- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        pace_collector()  # see kernel/collector.py: the default pace cost a third of the CPU
        self.paths.ensure()
        self.configuration.reread()  # ConfigError: refuse to start, say why
        self.database.prepare()
        if not self.options.defer_database:
            self.database.open()
        await self.writer.start()
        # Probed in the background (tens of ms): exec and gates wait for it when they run.
        self._sandbox_probe = asyncio.create_task(self.sandbox.support(), name="sandbox-probe")
        await self.configuration.rebuild_providers()
        self.files.settings = self.settings.files
        parts = build_agents(
            self.paths,
            self.settings,
            writer=self.writer,
            events=self.events,
            router=self.providers.router,
            tools=self.tools,
            connectors=self.registries.connectors,
            outbox=self.outbox,
            meter=self.metrics,
            files=self.files,
            protected_paths=self.sandbox.protected_paths(),
        )
        agents = parts.agents
        self.conversations.bind(agents, parts.permissions)
        cron, heartbeat, proactive = build_schedulers(
            self.paths,
            self.settings,
            agents=agents,
            events=self.events,
            clock=self.options.clock,
            sandbox=self.sandbox,
            tools=self.tools,
            durable=self.options.durable,
            watch_files=self.options.watch_files,
            env=self.options.env,
            read_auth=self.config.read_auth,
        )
        recovered = await agents.boot()
        # Plugins start after the agents: their connectors post messages at once.
        await self.plugins.restore()
        # Again now that plugins are loaded: one may have registered a provider type
        # that settings name (the first build counted such a provider as failed), and
        # before the recovered turns resume, so that they call the providers settings
        # name. A turn a connector started meanwhile finishes on the first build.
        await self.configuration.rebuild_providers()
        # Turns a crash cut short resume once their connectors are back.
        await agents.resume_recovered()
        await parts.permissions.boot()  # after the connectors: it may re-present prompts
        self._running = Running(agents, parts.permissions, cron, heartbeat, proactive)
        await self._running.start_schedules(heartbeat=self.settings.heartbeat.enabled)
        self.jobs.start(self.settings.jobs, self.providers.router)
        self._file_collection = asyncio.create_task(
            collect_forever(self.files, self.paths), name="file-collection"
        )
        extra = {
            "action": "engine.started",
            "agents": len(agents.directory),
            "recovered": recovered,
        }
        log.info("engine started", extra=extra)

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        # Nothing goes out from here: the event streams end and the connectors go. A
        # reply a draining turn makes is held, its item left pending, and the next
        # start delivers it (a reply written is a reply delivered, across any stop).
        self.outbox.hold()
        self.events.close_subscriptions()
        if self._file_collection is not None:
            self._file_collection.cancel()
            await asyncio.gather(self._file_collection, return_exceptions=True)
        running = self._running
        if running is not None:
            await running.stop_schedules()
        await self.plugins.shutdown()  # connectors stop taking messages first
        if running is not None:
            await running.permissions.shutdown()
            await running.agents.shutdown(drain_timeout_s)
        await self.providers.close()
        await self.writer.close()
        if self._sandbox_probe is not None:
            await asyncio.gather(self._sandbox_probe, return_exceptions=True)
        await self.sandbox.close()
        await self.jobs.stop()
        await self.database.close()

    @property
    def keys(self) -> DeferredApiKeyStore:
        return self.database.keys

    # -- providers --------------------------------------------------------------

    @property
    def router(self) -> InferenceRouter:
        return self.providers.router

    # -- messages in and out ------------------------------------------------------------

    async def post_inbound(self, message: InboundMessage) -> PostedMessage:
        """What connectors post through (``PostInbound``): durable when this returns."""
        turn = await self.agents.submit_inbound(message)
        return PostedMessage(turn.agent_id, turn.id, duplicate=turn.duplicate)

    # -- metrics ----------------------------------------------------------------

    def _pending(self) -> int:
        running = self._running
        return running.agents.pending_count() if running is not None else 0

    async def _job_counts(self) -> dict[str, int]:
        return await self.jobs.counts()

    # -- status -----------------------------------------------------------------

    def status(self) -> StatusReport:
        return self.status_view.status()

    def _status_sources(self) -> StatusSources:
        running = self._running
        return StatusSources(
            self.paths,
            self.settings,
            self.started_at,
            self.tcp_port,
            self.plugins,
            self.providers,
            self.registries,
            self.sandbox,
            self.tools,
            self.database.key_store,
            running.agents if running else None,
        )
