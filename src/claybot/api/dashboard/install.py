"""Putting the dashboard into the engine's application: its routers, its assets, its auth."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from claybot.api.dashboard.agent_pages import router as agent_pages
from claybot.api.dashboard.auth import DashboardAuth
from claybot.api.dashboard.automation_pages import router as automation_pages
from claybot.api.dashboard.chat_pages import router as chat_pages
from claybot.api.dashboard.file_pages import router as file_pages
from claybot.api.dashboard.job_pages import router as job_pages
from claybot.api.dashboard.key_pages import router as key_pages
from claybot.api.dashboard.paths import STATIC_ROOT
from claybot.api.dashboard.permission_pages import router as permission_pages
from claybot.api.dashboard.proactive_pages import router as proactive_pages
from claybot.api.dashboard.rendering import STATIC
from claybot.api.dashboard.routes import control, pages
from claybot.api.dashboard.settings_pages import router as settings_pages


def install_dashboard(app: FastAPI, auth: DashboardAuth | None = None) -> None:
    app.state.dashboard_auth = auth or DashboardAuth()
    app.include_router(control)  # the socket's: login links and sessions
    routers = (
        pages,
        chat_pages,
        file_pages,
        agent_pages,
        permission_pages,
        automation_pages,
        proactive_pages,
        job_pages,
        key_pages,
        settings_pages,
    )
    for router in routers:
        app.include_router(router)
    app.mount(STATIC_ROOT, StaticFiles(directory=STATIC), name="static")
