"""How the engine's parts are put together: the agent runtime, and the schedules.

Pure construction, in the order the parts need each other; the engine
(``engine.py``) owns what is built and starts and stops it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from claybot.agents.agent import AgentRuntime
from claybot.agents.agent_tools import AgentTools
from claybot.agents.file_tools import FileTools
from claybot.agents.inbox_log import InboxLog
from claybot.agents.permission_desk import PermissionDesk
from claybot.agents.permission_tools import PermissionTools
from claybot.agents.ports import Outbox, TurnMeter
from claybot.agents.store import FileAgentStore
from claybot.agents.system import AgentSystem, SubagentLimits
from claybot.agents.turn_loop import DEFAULT_SYSTEM_PROMPT, LoopLimits, TurnLoop
from claybot.config.auth import AuthFile
from claybot.config.home import HomePaths
from claybot.config.settings import Settings
from claybot.connectors.outbox import Connectors
from claybot.cron.host import AgentCronHost
from claybot.cron.ledger import LEDGER_FILE, RunLedger
from claybot.cron.scheduler import CronScheduler
from claybot.cron.store import CronStore
from claybot.cron.tools import CronTools
from claybot.durable.group_commit import GroupCommitWriter
from claybot.files.store import FileStore
from claybot.heartbeat.host import AgentHeartbeatHost
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.heartbeat.store import HeartbeatStore
from claybot.heartbeat.tools import HeartbeatTools
from claybot.kernel.clock import Clock
from claybot.kernel.events import EventBus
from claybot.permissions.granted_open import NOTHING_PROTECTED
from claybot.permissions.model import Permissions
from claybot.permissions.protected import ProtectedPaths
from claybot.permissions.requests import PermissionBroker
from claybot.proactive.service import ProactiveService
from claybot.proactive.wiring import build_proactive_service
from claybot.providers.router import InferenceRouter
from claybot.sandbox import Sandbox
from claybot.scheduling.gate import gate_runner
from claybot.tools.base import ToolRegistry


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Running:
    """What ``start`` builds: there only while the engine runs."""

    agents: AgentSystem
    permissions: PermissionBroker
    cron: CronScheduler
    heartbeat: HeartbeatScheduler
    proactive: ProactiveService

    async def start_schedules(self, *, heartbeat: bool) -> None:
        await self.proactive.start()
        await self.cron.start()
        if heartbeat:
            await self.heartbeat.start()

    async def stop_schedules(self) -> None:
        """No new runs; proactive runs are killed and their state saved; cron runs not
        finished resume at the next boot."""
        await self.proactive.stop()
        await self.cron.stop()
        await self.heartbeat.stop()


@dataclass(frozen=True)
class AgentParts:
    agents: AgentSystem
    permissions: PermissionBroker


def default_permissions(paths: HomePaths) -> Permissions:
    """A new agent may read and write its home's workspace, and nothing else."""
    workspace = str(paths.workspace.resolve())
    return Permissions(workingDir=workspace, readDirs=[workspace], writeDirs=[workspace])


def build_agents(
    paths: HomePaths,
    settings: Settings,
    *,
    writer: GroupCommitWriter,
    events: EventBus,
    router: InferenceRouter,
    tools: ToolRegistry,
    connectors: Connectors,
    outbox: Outbox,
    meter: TurnMeter,
    files: FileStore | None = None,
    protected_paths: ProtectedPaths = NOTHING_PROTECTED,
) -> AgentParts:
    """The agent runtime, the permission desk in front of it, and the agents' own tools
    (``protected_paths``: what no file tool may open, whatever the grants)."""
    agent_settings = settings.agents
    runtime = AgentRuntime(
        store=FileAgentStore(paths.agents, writer),
        inbox_log=InboxLog(paths.agents / "inbox.wal", writer, root=paths.home),
        events=events,
        outbox=outbox,
        loop=TurnLoop(
            providers=router,
            tools=tools,
            events=events,
            now_ms=now_ms,
            limits=LoopLimits(
                system_prompt=agent_settings.system_prompt or DEFAULT_SYSTEM_PROMPT,
                max_context_messages=agent_settings.max_context_messages,
                max_tool_iterations=agent_settings.max_tool_iterations,
                tool_output_limit=agent_settings.tool_output_limit,
            ),
        ),
        now_ms=now_ms,
        default_permissions=default_permissions(paths),
        meter=meter,
        files=files,
        received=paths.received.resolve(),
    )
    agents = AgentSystem(
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
        agents,
        connectors,
        path=paths.home / "permissions" / "requests.jsonl",
        events=events,
        now_ms=now_ms,
        timeout_s=settings.permissions.request_timeout_s,
    )
    for tool in [
        *AgentTools(agents).definitions(),
        *PermissionTools(desk.ask, protected_paths).definitions(),
    ]:
        tools.register(tool)
    if files is not None:
        for tool in FileTools(files, protected_paths).definitions():
            tools.register(tool)
    return AgentParts(agents, desk.broker)


def build_schedulers(
    paths: HomePaths,
    settings: Settings,
    *,
    agents: AgentSystem,
    events: EventBus,
    clock: Clock,
    sandbox: Sandbox,
    tools: ToolRegistry,
    durable: bool,
    watch_files: bool,
    env: Mapping[str, str],
    read_auth: Callable[[], AuthFile],
) -> tuple[CronScheduler, HeartbeatScheduler, ProactiveService]:
    """Cron, the heartbeat and proactive agents, over the agents, with the tools agents
    manage the first two by."""
    cron = CronScheduler(
        CronStore(paths.home / "cron", settings.engine.timezone),
        RunLedger(paths.home / "cron" / LEDGER_FILE, durable=durable),
        AgentCronHost(agents),
        events,
        clock,
        gate_runner(sandbox),
        watch=watch_files,
    )
    heartbeat = HeartbeatScheduler(
        HeartbeatStore(paths.home / "heartbeat"),
        AgentHeartbeatHost(agents),
        events,
        clock,
        gate_runner(sandbox),
        interval=timedelta(seconds=settings.heartbeat.interval_s),
    )
    for tool in [*CronTools(cron, agents).definitions(), *HeartbeatTools(heartbeat).definitions()]:
        tools.register(tool)
    proactive = build_proactive_service(
        home=paths.home,
        settings=settings.proactive,
        engine_timezone=settings.engine.timezone,
        env=env,
        read_auth=read_auth,
        agents=agents,
        events=events,
        clock=clock,
    )
    return cron, heartbeat, proactive
