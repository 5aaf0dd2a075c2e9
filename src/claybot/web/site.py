"""The dashboard's pages and assets, gathered: what ``install.py`` loads the first
time a page is asked for."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from claybot.api.dashboard_paths import STATIC_ROOT
from claybot.web.agent_pages import router as agent_pages
from claybot.web.automation_pages import router as automation_pages
from claybot.web.chat_pages import router as chat_pages
from claybot.web.file_pages import router as file_pages
from claybot.web.job_pages import router as job_pages
from claybot.web.key_pages import router as key_pages
from claybot.web.permission_pages import router as permission_pages
from claybot.web.proactive_pages import router as proactive_pages
from claybot.web.rendering import STATIC
from claybot.web.routes import pages
from claybot.web.settings_pages import router as settings_pages

ROUTERS = (
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


def page_routes() -> list[BaseRoute]:
    """Every page's route, and the static assets' mount."""
    gathered = APIRouter()
    for router in ROUTERS:
        gathered.include_router(router)
    return [*gathered.routes, Mount(STATIC_ROOT, StaticFiles(directory=STATIC), name="static")]
