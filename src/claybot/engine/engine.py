"""The engine: wires stores, agents, providers, plugins and listeners together.

``Engine.start`` / ``Engine.stop`` are the only startup and shutdown path; the
HTTP layer gets the running engine through ``app.state.engine``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from claybot import __version__
from claybot.agents.agent import AgentRuntime
from claybot.agents.agent_tools import AgentTools
from claybot.agents.control import AgentConversationControl
from claybot.agents.inbox import InboxLog
from claybot.agents.permission_desk import PermissionDesk
from claybot.agents.permission_tools import PermissionTools
from claybot.agents.store import FileAgentStore
from claybot.agents.system import AgentSystem, SubagentLimits
from claybot.agents.turn_loop import DEFAULT_SYSTEM_PROMPT, LoopLimits, TurnLoop
from claybot.config.auth import AuthFile
from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.config.store import ConfigStore
from claybot.connectors.base import (
    InboundMessage,
    PostedMessage,
)
from claybot.connectors.outbox import ConnectorOutbox
from claybot.connectors.webchat import WEBCHAT_CONNECTOR
from claybot.cron.host import AgentCronHost
from claybot.cron.ledger import RunLedger
from claybot.cron.scheduler import CronScheduler
from claybot.cron.store import CronStore
from claybot.cron.tools import CronTools
from claybot.db.location import database_url
from claybot.durable.group_commit import GroupCommitWriter
from claybot.engine.keystore import DeferredApiKeyStore, open_database
from claybot.heartbeat.host import AgentHeartbeatHost
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.heartbeat.store import HeartbeatStore
from claybot.heartbeat.tools import HeartbeatTools
from claybot.kernel.clock import Clock, SystemClock
from claybot.kernel.events import EventBus
from claybot.permissions.model import Permissions
from claybot.permissions.prompts import PermissionOutcome
from claybot.permissions.requests import (
    PermissionBroker,
)
from claybot.plugins import LoadedPlugin, PluginCatalog, PluginManager, Registries
from claybot.proactive.service import ProactiveService
from claybot.proactive.wiring import build_proactive_service
from claybot.providers.configured import ConfiguredProviders
from claybot.providers.registry import (
    ProviderRegistry,
    builtin_provider_types,
)
from claybot.providers.router import InferenceRouter
from claybot.sandbox import Sandbox
from claybot.scheduling.gate import (
    gate_runner,
)
from claybot.tools.base import ToolRegistry

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class EngineOptions:
    port: int | None = None  # overrides settings.engine.port (0 picks a free port)
    durable: bool = True  # False skips fsync (benchmarks of the pure path only)
    catalog: PluginCatalog | None = None  # default: built-ins + the claybot.plugins entry points
    # The runner opens the database once its listeners are up (see start_database).
    defer_database: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=SystemClock)  # what schedules read (tests move it)
    watch_files: bool = True  # pick up TASK.md edits without a restart


class Engine:
    def __init__(self, paths: HomePaths, options: EngineOptions | None = None) -> None:
        self.paths = paths
        self.options = options or EngineOptions()
        self.config = ConfigStore(paths)
        self.settings: Settings = Settings()
        self.events = EventBus()
        self.writer = GroupCommitWriter(
            durable=self.options.durable, journal=paths.agents / "inbox.wal", root=paths.home
        )
        self.provider_registry = ProviderRegistry(builtin_provider_types())
        self.tools = ToolRegistry()
        self.registries = Registries(tools=self.tools, providers=self.provider_registry)
        self.catalog = self.options.catalog or PluginCatalog.discover()
        # One sandbox for every command agents run (exec and gates): probed once at start.
        self.sandbox = Sandbox(paths.home, environ=self.options.env)
        self.plugins = PluginManager(
            self.catalog,
            self.registries,
            self.config,
            self.events,
            paths,
            self.post_inbound,
            control=self,
            sandbox=self.sandbox,
        )
        self.providers = ConfiguredProviders(self.provider_registry, self.options.env)
        self.started_at = datetime.now(UTC)
        self.tcp_port: int | None = None
        self._agents: AgentSystem | None = None
        self._permissions: PermissionBroker | None = None
        self._control: AgentConversationControl | None = None
        self._cron: CronScheduler | None = None
        self._heartbeat: HeartbeatScheduler | None = None
        self.database_url = database_url(paths, self.options.env)
        self.database: Any = None  # the SQLAlchemy engine, once open
        self._database_task: asyncio.Task[Any] | None = None
        self._keys: DeferredApiKeyStore | None = None
        self._proactive: ProactiveService | None = None
        self._sandbox_probe: asyncio.Task[Any] | None = None

    @property
    def agents(self) -> AgentSystem:
        if self._agents is None:
            raise RuntimeError("the engine is not started")
        return self._agents

    @property
    def proactive(self) -> ProactiveService:
        if self._proactive is None:
            raise RuntimeError("the engine is not started")
        return self._proactive

    # -- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        self.paths.ensure()
        self.settings = self.config.read_settings()  # ConfigError: refuse to start, say why
        self._keys = DeferredApiKeyStore()
        if not self.options.defer_database:
            self.start_database()
        await self.writer.start()
        # Probed in the background (tens of ms): exec and gates wait for it when they run.
        self._sandbox_probe = asyncio.create_task(self.sandbox.support(), name="sandbox-probe")
        await self.rebuild_providers()
        agent_settings = self.settings.agents
        runtime = AgentRuntime(
            store=FileAgentStore(self.paths.agents, self.writer),
            inbox_log=InboxLog(self.paths.agents / "inbox.wal", self.writer),
            events=self.events,
            outbox=ConnectorOutbox(self.registries.connectors),
            loop=TurnLoop(
                providers=self.providers.router,
                tools=self.tools,
                events=self.events,
                now_ms=now_ms,
                limits=LoopLimits(
                    system_prompt=agent_settings.system_prompt or DEFAULT_SYSTEM_PROMPT,
                    max_context_messages=agent_settings.max_context_messages,
                    max_tool_iterations=agent_settings.max_tool_iterations,
                    tool_output_limit=agent_settings.tool_output_limit,
                ),
            ),
            now_ms=now_ms,
            default_permissions=self._default_permissions(),
        )
        self._agents = AgentSystem(
            runtime,
            max_concurrent=agent_settings.max_concurrent,
            idle_unload_s=agent_settings.idle_unload_s,
            max_message_bytes=agent_settings.max_message_bytes,
            subagent_limits=SubagentLimits(
                max_depth=agent_settings.max_subagent_depth,
                max_busy_children=agent_settings.max_children,
            ),
        )
        desk = PermissionDesk(
            self._agents,
            self.registries.connectors,
            path=self.paths.home / "permissions" / "requests.jsonl",
            events=self.events,
            now_ms=now_ms,
            timeout_s=self.settings.permissions.request_timeout_s,
        )
        self._permissions = desk.broker
        self._control = AgentConversationControl(self._agents, desk.broker)
        for tool in [
            *AgentTools(self._agents).definitions(),
            *PermissionTools(desk.ask).definitions(),
        ]:
            self.tools.register(tool)
        self._cron = CronScheduler(
            CronStore(self.paths.home / "cron", self.settings.engine.timezone),
            RunLedger(self.paths.home / "cron" / ".runs.jsonl", durable=self.options.durable),
            AgentCronHost(self._agents),
            self.events,
            self.options.clock,
            gate_runner(self.sandbox),
            watch=self.options.watch_files,
        )
        self._heartbeat = HeartbeatScheduler(
            HeartbeatStore(self.paths.home / "heartbeat"),
            AgentHeartbeatHost(self._agents),
            self.events,
            self.options.clock,
            gate_runner(self.sandbox),
            interval=timedelta(seconds=self.settings.heartbeat.interval_s),
        )
        for tool in [
            *CronTools(self._cron, self._agents).definitions(),
            *HeartbeatTools(self._heartbeat).definitions(),
        ]:
            self.tools.register(tool)
        recovered = await self._agents.boot()
        # Plugins start after the agents: their connectors post messages at once.
        await self.plugins.restore()
        await self._permissions.boot()  # after the connectors: it may re-present prompts
        self._proactive = build_proactive_service(
            home=self.paths.home,
            settings=self.settings.proactive,
            engine_timezone=self.settings.engine.timezone,
            env=self.options.env,
            read_auth=self.config.read_auth,
            agents=self._agents,
            events=self.events,
            clock=self.options.clock,
        )
        await self._proactive.start()
        await self._cron.start()
        if self.settings.heartbeat.enabled:
            await self._heartbeat.start()
        await self.rebuild_providers()
        log.info(
            "engine started",
            extra={
                "action": "engine.started",
                "agents": self._agents.agent_count,
                "recovered": recovered,
            },
        )

    def _default_permissions(self) -> Permissions:
        """A new agent may read and write its home's workspace, and nothing else."""
        workspace = str(self.paths.workspace.resolve())
        return Permissions(workingDir=workspace, readDirs=[workspace], writeDirs=[workspace])

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        if self._proactive is not None:
            await self._proactive.stop()  # schedules stop, runs are killed, state is saved
        if self._cron is not None:
            await self._cron.stop()  # no new runs; unfinished ones resume next boot
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        await self.plugins.shutdown()  # connectors stop taking messages first
        if self._permissions is not None:
            await self._permissions.shutdown()
        if self._agents is not None:
            await self._agents.shutdown(drain_timeout_s)
        await self.providers.close()
        await self.writer.close()
        if self._sandbox_probe is not None:
            await asyncio.gather(self._sandbox_probe, return_exceptions=True)
        await self.sandbox.close()
        if self._database_task is not None:
            self.database = await self._database_task
            if self.database is not None:
                await self.database.dispose()

    def start_database(self) -> None:
        """Open the database in the background; key operations wait for it."""
        if self._database_task is None:
            self._database_task = asyncio.create_task(open_database(self.database_url, self.keys))

    @property
    def keys(self) -> DeferredApiKeyStore:
        if self._keys is None:
            raise RuntimeError("the engine is not started")
        return self._keys

    # -- providers --------------------------------------------------------------

    async def rebuild_providers(self) -> None:
        """Create the enabled providers in priority order; a broken one is reported, not fatal."""
        await self.providers.rebuild(self.settings, self.config.read_auth())

    @property
    def router(self) -> InferenceRouter:
        return self.providers.router

    @property
    def provider_failures(self) -> dict[str, str]:
        return self.providers.failures

    # -- settings and auth mutations ------------------------------------------------

    async def update_settings(self, settings: Settings) -> None:
        self.config.write_settings(settings)
        self.settings = settings
        await self.rebuild_providers()

    async def set_auth_field(self, entry_id: str, key: str, value: str) -> None:
        auth: AuthFile = self.config.read_auth().with_field(entry_id, key, value)
        self.config.write_auth(auth)
        self.events.emit("auth.updated", {"id": entry_id, "key": key})
        await self.rebuild_providers()

    # -- plugins --------------------------------------------------------------------

    async def load_plugin(
        self, plugin_id: str, instance_id: str | None, settings: dict[str, Any] | None
    ) -> dict[str, Any]:
        loaded: LoadedPlugin = await self.plugins.load(plugin_id, instance_id, settings)
        self.settings = self.config.read_settings()
        await self.rebuild_providers()  # the plugin may have registered a provider type
        return {"id": loaded.instance_id, "pluginId": loaded.plugin_id, "name": loaded.name}

    async def unload_plugin(self, instance_id: str) -> None:
        await self.plugins.unload(instance_id)
        self.settings = self.config.read_settings()
        await self.rebuild_providers()

    def plugin_listing(self) -> dict[str, Any]:
        return {
            "loaded": self.plugins.plugin_summaries(),
            "configured": self.plugins.configured(),
            "failures": self.plugins.failure_summaries(),
            "catalog": self.catalog.describe(),
        }

    # -- messages in and out ------------------------------------------------------------

    async def post_inbound(self, message: InboundMessage) -> PostedMessage:
        """What connectors post through (``PostInbound``): durable when this returns."""
        turn = await self.agents.submit_inbound(message)
        return PostedMessage(turn.agent_id, turn.id, duplicate=turn.duplicate)

    # -- permission requests ----------------------------------------------------------

    @property
    def permissions(self) -> PermissionBroker:
        if self._permissions is None:
            raise RuntimeError("the engine is not started")
        return self._permissions

    # -- cron (the scheduler's host) -----------------------------------------------------

    @property
    def cron(self) -> CronScheduler:
        if self._cron is None:
            raise RuntimeError("the engine is not started")
        return self._cron

    # -- heartbeat (the scheduler's host) -------------------------------------------------

    @property
    def heartbeat(self) -> HeartbeatScheduler:
        if self._heartbeat is None:
            raise RuntimeError("the engine is not started")
        return self._heartbeat

    # -- conversation control (what connectors may ask) -----------------------------

    async def reset_conversation(
        self, connector: str, user_id: str, channel_id: str, command_id: str | None = None
    ) -> bool:
        return await self._conversations.reset_conversation(
            connector, user_id, channel_id, command_id
        )

    async def stop_conversation(self, connector: str, user_id: str, channel_id: str) -> bool:
        return await self._conversations.stop_conversation(connector, user_id, channel_id)

    async def decide_permission(
        self, connector: str, request_id: str, approved: bool
    ) -> PermissionOutcome:
        return await self._conversations.decide_permission(connector, request_id, approved)

    @property
    def _conversations(self) -> AgentConversationControl:
        if self._control is None:
            raise RuntimeError("the engine is not started")
        return self._control

    # -- status -----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        providers = [
            {
                "id": p.id,
                "name": p.id,
                "label": p.provider_type,
                "enabled": p.enabled,
                "model": p.model,
            }
            for p in self.settings.providers
        ]
        inference = [
            {"id": p.id, "name": p.id, "label": p.label, "model": p.model}
            for p in self.router.providers
        ]
        return {
            "version": __version__,
            "pid": os.getpid(),
            "home": str(self.paths.home),
            "startedAt": self.started_at.isoformat().replace("+00:00", "Z"),
            "socketPath": str(self.paths.socket),
            "tcp": {"host": self.settings.engine.host, "port": self.tcp_port},
            "plugins": self.plugins.plugin_summaries(),
            "connectors": [
                *self._builtin_connector_summaries(),
                *self.plugins.connector_summaries(),
            ],
            "providers": providers,
            "inferenceProviders": inference,
            "imageProviders": self.registries.images.summaries(),
            "database": {
                "ready": self._keys.ready if self._keys else False,
                "error": self._keys.error if self._keys else None,
            },
            "providerFailures": self.provider_failures,
            "sandbox": self.sandbox.status(),
            "pluginFailures": self.plugins.failure_summaries(),
            "tools": self.tools.names(),
            "agents": {
                "total": self.agents.agent_count if self._agents else 0,
                "loaded": self.agents.loaded_count if self._agents else 0,
                "pendingItems": self.agents.pending_count() if self._agents else 0,
                "problems": self.agents.problems() if self._agents else [],
            },
            "sideTasks": [task.to_dict() for task in self.agents.side_tasks.status()]
            if self._agents
            else [],
        }

    def _builtin_connector_summaries(self) -> list[dict[str, Any]]:
        """The connectors that are views of the event stream rather than plugins."""
        loaded_at = self.started_at.isoformat().replace("+00:00", "Z")
        return [
            {"id": connector_id, "pluginId": None, "name": name, "loadedAt": loaded_at}
            for connector_id, name in (
                ("local", "Local (CLI and socket API)"),
                (WEBCHAT_CONNECTOR, "Web chat (dashboard)"),
            )
        ]
