"""The engine's ASGI application."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from starlette.types import ASGIApp

from claybot import __version__
from claybot.api.body_limit import BodyLimitMiddleware
from claybot.api.codeck.proactive_routes import router as proactive_router
from claybot.api.codeck.routes import router as codeck_router
from claybot.api.dashboard_auth import DashboardAuth
from claybot.api.dashboard_paths import CHAT_FORM_SLACK_BYTES, CHAT_PAGES
from claybot.api.engine.cron_routes import router as cron_router
from claybot.api.engine.dashboard_routes import control as dashboard_control
from claybot.api.engine.file_routes import FILES_PATH
from claybot.api.engine.file_routes import router as file_router
from claybot.api.engine.heartbeat_routes import router as heartbeat_router
from claybot.api.engine.metrics_routes import router as metrics_router
from claybot.api.engine.permission_routes import router as permission_router
from claybot.api.engine.provider_routes import router as provider_router
from claybot.api.engine.routes import router
from claybot.api.engine.webchat_routes import router as webchat_router
from claybot.api.errors import install_error_handlers
from claybot.api.jobs.admin_routes import router as job_admin_router
from claybot.api.jobs.registry_routes import router as registry_router
from claybot.api.jobs.routes import UPLOAD_PATH
from claybot.api.jobs.routes import router as job_router
from claybot.api.openai.routes import CHAT_MAX_BODY_BYTES, CHAT_PATH
from claybot.api.openai.routes import router as openai_router
from claybot.api.responses import errors
from claybot.engine.engine import Engine
from claybot.jobs.artifact_links import ArtifactLinks
from claybot.server import openapi
from claybot.web.install import install_dashboard

MULTIPART_SLACK_BYTES = 64 * 1024


def create_app(
    engine: Engine,
    request_shutdown: Callable[[], None] = lambda: None,
    dashboard_auth: DashboardAuth | None = None,
    artifact_links: ArtifactLinks | None = None,
) -> ASGIApp:
    """``artifact_links``: the signer the TCP listener checks the artifacts' links with
    (its own when not given, for an app no listener shares it with)."""
    app = FastAPI(
        title="ClayBot engine API",
        version=__version__,
        description=(
            "Control API of a ClayBot engine. On the Unix socket it is trusted; on TCP every "
            "request needs `Authorization: Bearer cb_...` with the route's scope."
        ),
        responses=errors(500),  # any route, for a bug; the details stay in the engine log
    )
    app.state.services = engine.services
    app.state.request_shutdown = request_shutdown
    app.state.artifact_links = artifact_links or ArtifactLinks()
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(provider_router)
    app.include_router(permission_router)
    app.include_router(cron_router)
    app.include_router(heartbeat_router)
    app.include_router(webchat_router)
    app.include_router(file_router)
    app.include_router(proactive_router)
    app.include_router(codeck_router)
    app.include_router(job_router)
    app.include_router(job_admin_router)
    app.include_router(registry_router)
    app.include_router(metrics_router)
    app.include_router(openai_router)
    app.include_router(dashboard_control)  # the socket's: login links and sessions
    install_dashboard(app, dashboard_auth)
    openapi.install(app, lambda: (t.type for t in engine.provider_registry.types()))
    # An upload may be as large as a job's file, or a message's (plus the multipart
    # framing around it); a dashboard chat form holds a message's files and its text.
    larger = {
        UPLOAD_PATH: lambda: engine.settings.jobs.max_file_bytes + MULTIPART_SLACK_BYTES,
        FILES_PATH: lambda: engine.settings.files.max_file_bytes + MULTIPART_SLACK_BYTES,
        CHAT_PATH: lambda: CHAT_MAX_BODY_BYTES,
    }
    larger_under = {
        CHAT_PAGES: lambda: engine.settings.files.max_message_bytes + CHAT_FORM_SLACK_BYTES,
    }
    return BodyLimitMiddleware(app, larger=larger, larger_under=larger_under)
