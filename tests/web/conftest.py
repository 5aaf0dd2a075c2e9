"""The dashboard in-process: the owner's socket app and a browser's TCP app, one clock."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import pytest
from starlette.types import ASGIApp

from claybot.api.dashboard_auth import DashboardAuth
from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.engine.engine import Engine
from claybot.server.app import create_app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Dashboard:
    socket: httpx.AsyncClient  # the owner's: where `claybot dashboard` asks for links
    tcp: httpx.AsyncClient  # a browser's
    clock: Clock
    tcp_app: ASGIApp

    def browser(self) -> httpx.AsyncClient:
        """Another browser, with cookies of its own (the caller closes it)."""
        transport = httpx.ASGITransport(app=self.tcp_app)
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8421")

    async def link(self) -> str:
        response = await self.socket.post("/v1/engine/dashboard/links")
        assert response.status_code == 201, response.text
        url = str(response.json()["url"])
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/login\?token=[\w-]{43}", url), url
        return url.split("/", 3)[3]  # the path and query, for the in-process client

    async def log_in(self) -> httpx.Response:
        response = await self.tcp.get("/" + await self.link())
        assert response.status_code == 303 and response.headers["location"] == "/"
        return response


@asynccontextmanager
async def open_dashboard(engine: Engine, auth: DashboardAuth) -> AsyncIterator[Dashboard]:
    """The dashboard of ``engine`` with ``auth`` (whose clock must be a ``Clock``)."""
    assert isinstance(auth.clock, Clock)
    app = create_app(engine, dashboard_auth=auth)
    tcp_app = ApiKeyMiddleware(app, engine.keys)
    engine.tcp_port = 8421
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as socket,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=tcp_app), base_url="http://127.0.0.1:8421"
        ) as tcp,
    ):
        yield Dashboard(socket, tcp, auth.clock, tcp_app)


@pytest.fixture
async def dashboard(engine: Engine) -> AsyncIterator[Dashboard]:
    async with open_dashboard(engine, DashboardAuth(clock=Clock())) as opened:
        yield opened


def csrf_of(page: str) -> str:
    """The CSRF token a page's forms carry (the session's, or the login form's)."""
    found = re.search(r'name="csrf" value="([\w-]+)"', page)
    assert found is not None, "the page has no form token"
    return found.group(1)
