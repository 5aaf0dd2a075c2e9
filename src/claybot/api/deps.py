"""The services routes receive, as FastAPI dependencies: ``Annotated[Service, Depends]``.

A route names what it needs in its signature and gets the engine's instance
(``kernel/services.py``); nothing reaches past it into the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends
from starlette.requests import HTTPConnection

from claybot.agents.system import AgentSystem
from claybot.agents.webchat import WebchatConversations
from claybot.api.dashboard_auth import DashboardAuth
from claybot.config.home import HomePaths
from claybot.cron.scheduler import CronScheduler
from claybot.engine.address import EngineAddress
from claybot.engine.configuration import LiveConfiguration
from claybot.engine.feeds import ConversationFeed, EngineFeed
from claybot.engine.jobs_host import JobsHost
from claybot.engine.keystore import DeferredApiKeyStore
from claybot.engine.metrics import EngineMetrics
from claybot.engine.status import StatusView
from claybot.files.store import FileStore
from claybot.heartbeat.scheduler import HeartbeatScheduler
from claybot.jobs.service import JobService
from claybot.kernel.events import EventBus
from claybot.kernel.services import ServiceRegistry
from claybot.permissions.requests import PermissionBroker
from claybot.plugins import PluginManager
from claybot.proactive.service import ProactiveService
from claybot.providers.admin import ProviderAdmin

T = TypeVar("T")


def services_of(connection: HTTPConnection) -> ServiceRegistry:
    services = connection.app.state.services
    assert isinstance(services, ServiceRegistry)
    return services


def service(kind: type[T]) -> Callable[[HTTPConnection], Awaitable[T]]:
    """A dependency that answers with the ``kind`` service (HTTP routes and WebSockets).

    Async although it awaits nothing: FastAPI runs a plain function dependency in a
    worker thread, and that hand-off, per dependency per request, cost the socket's
    message route a third of its throughput (bench/compare_agents.py)."""

    async def dependency(connection: HTTPConnection) -> T:
        return services_of(connection).get(kind)

    dependency.__name__ = f"{kind.__name__}_service"
    return dependency


def dashboard_auth_of(connection: HTTPConnection) -> DashboardAuth:
    """The dashboard's sessions and login links, which the app holds
    (``web/install.py``) rather than the engine."""
    auth = connection.app.state.dashboard_auth
    assert isinstance(auth, DashboardAuth)
    return auth


async def _dashboard_auth(connection: HTTPConnection) -> DashboardAuth:
    return dashboard_auth_of(connection)  # async: see ``service``


ProviderAdminDep = Annotated[ProviderAdmin, Depends(service(ProviderAdmin))]
ConfigurationDep = Annotated[LiveConfiguration, Depends(service(LiveConfiguration))]
PermissionsDep = Annotated[PermissionBroker, Depends(service(PermissionBroker))]
HeartbeatDep = Annotated[HeartbeatScheduler, Depends(service(HeartbeatScheduler))]
MetricsDep = Annotated[EngineMetrics, Depends(service(EngineMetrics))]
FilesDep = Annotated[FileStore, Depends(service(FileStore))]
KeysDep = Annotated[DeferredApiKeyStore, Depends(service(DeferredApiKeyStore))]
ProactiveDep = Annotated[ProactiveService, Depends(service(ProactiveService))]
JobsDep = Annotated[JobService, Depends(service(JobService))]
AgentsDep = Annotated[AgentSystem, Depends(service(AgentSystem))]
EventsDep = Annotated[EventBus, Depends(service(EventBus))]
CronDep = Annotated[CronScheduler, Depends(service(CronScheduler))]
PluginsDep = Annotated[PluginManager, Depends(service(PluginManager))]
StatusDep = Annotated[StatusView, Depends(service(StatusView))]
ConversationFeedDep = Annotated[ConversationFeed, Depends(service(ConversationFeed))]
DashboardAuthDep = Annotated[DashboardAuth, Depends(_dashboard_auth)]
JobsHostDep = Annotated[JobsHost, Depends(service(JobsHost))]
HomePathsDep = Annotated[HomePaths, Depends(service(HomePaths))]
WebchatDep = Annotated[WebchatConversations, Depends(service(WebchatConversations))]
AddressDep = Annotated[EngineAddress, Depends(service(EngineAddress))]
EngineFeedDep = Annotated[EngineFeed, Depends(service(EngineFeed))]
