"""Putting the dashboard into the engine's application: its sessions at once, its pages
the first time one is asked for. (The socket's routes for login links and sessions are
the engine door's, which ``server/app.py`` includes.)

The pages are about a sixth of the engine's import time (ten routers whose forms
FastAPI turns into models, Jinja2, markdown-it), and an engine serves agents and the API
whether or not anyone opens the dashboard. So a stand-in route holds the pages'
place: the first request for a dashboard path imports them (on a thread: the event
loop keeps serving meanwhile), puts their routes where the stand-in was, and routes
the request again. Requests that come meanwhile wait for the same import.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from fastapi import FastAPI
from starlette.routing import BaseRoute, Match, NoMatchFound, Router
from starlette.types import Receive, Scope, Send

from claybot.api.dashboard_auth import DashboardAuth
from claybot.api.dashboard_paths import is_dashboard_path

SITE = "claybot.web.site"


def install_dashboard(app: FastAPI, auth: DashboardAuth | None = None) -> None:
    app.state.dashboard_auth = auth or DashboardAuth()
    app.router.routes.append(DeferredPages(app.router))


class DeferredPages(BaseRoute):
    """Every dashboard path, until the pages are loaded; then the pages themselves."""

    def __init__(self, router: Router) -> None:
        self._router = router
        self._loading: asyncio.Future[None] | None = None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and is_dashboard_path(scope["path"]):
            return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        await asyncio.shield(self._loading)
        await self._router.app(scope, receive, send)  # among the pages, now

    async def _load(self) -> None:
        site = await asyncio.to_thread(importlib.import_module, SITE)
        routes = self._router.routes
        at = routes.index(self)
        routes[at : at + 1] = site.page_routes()
