"""The dashboard's pages load the first time one is asked for, not at boot (that boot
imports none of them: ``tests/api/test_boot_imports.py``)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from starlette.routing import Mount

from claybot.engine.engine import Engine
from claybot.web.install import DeferredPages, install_dashboard


async def test_the_first_requests_load_the_pages_once_and_all_get_their_page(
    engine: Engine,
) -> None:
    app = FastAPI()
    app.state.services = engine.services
    install_dashboard(app)
    routes = app.router.routes
    assert sum(isinstance(route, DeferredPages) for route in routes) == 1
    before = len(routes)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as browser:
        answers = await asyncio.gather(*(browser.get("/login") for _ in range(5)))
        assert [answer.status_code for answer in answers] == [200] * 5
        assert all("claybot dashboard" in answer.text for answer in answers)
        # The pages took the stand-in's place, once.
        assert not any(isinstance(route, DeferredPages) for route in routes)
        assert [r.path for r in routes if isinstance(r, Mount)] == ["/static"]
        assert len(routes) > before
        assert (await browser.get("/static/dashboard.css")).status_code == 200
        # A path that is not the dashboard's never meets the stand-in.
        assert (await browser.get("/v1/engine/status")).status_code == 404
