"""How a worker that went away is listed (``GET /api/v1/admin/workers``), on SQLite and
PostgreSQL: a ``claybot worker`` process stopped with SIGTERM drains and is ``stopped``;
one killed with SIGKILL says nothing and is ``dead`` once a lease has passed without it
(the engine's own worker sweeps); the engine's own worker, stopped with the engine, is
``stopped``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from claybot.config.home import HomePaths
from claybot.jobs.worker import default_worker_id
from claybot.server.app import create_app
from tests.conftest import ECHO_SETTINGS, engine_on_backend

pytestmark = pytest.mark.slow

LEASE_S = 4.0  # short: a killed worker is dead 4 s after it was last heard (beats: 1.3 s)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> pytest.FixtureRequest:
    return request


def database_env(backend: pytest.FixtureRequest) -> dict[str, str]:
    """What points a process at the backend's database: the PostgreSQL database that
    ``engine_on_backend`` gives the engine too, or (no variable) the home's SQLite."""
    if backend.param == "postgres":
        return {"CLAYBOT_DATABASE_URL": backend.getfixturevalue("fresh_postgres_url")}
    return {}


def settings(workers: int) -> dict[str, Any]:
    return {**ECHO_SETTINGS, "jobs": {"workers": workers, "leaseS": LEASE_S}}


@asynccontextmanager
async def engine_api(
    backend: pytest.FixtureRequest, paths: HomePaths, workers: int
) -> AsyncIterator[httpx.AsyncClient]:
    """An engine with ``workers`` slots of its own, and its API (the owner's view)."""
    async with engine_on_backend(backend, paths, settings(workers)) as engine:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as api:
            yield api


def start_worker(paths: HomePaths, env: dict[str, str], name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "claybot", "worker", "--id", name, "--slots", "1"],
        env={**os.environ, "CLAYBOT_HOME": str(paths.home), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def workers_until(
    api: httpx.AsyncClient, done: Callable[[dict[str, dict[str, Any]]], bool]
) -> dict[str, Any]:
    """``GET /api/v1/admin/workers`` again until ``done(workers by id)``; the answer."""
    async with asyncio.timeout(60):
        while True:
            answer = await api.get("/api/v1/admin/workers")
            assert answer.status_code == 200, answer.text
            listed = answer.json()
            if done({worker["id"]: worker for worker in listed["workers"]}):
                return dict(listed)
            await asyncio.sleep(0.1)


async def test_sigterm_is_stopped_and_sigkill_is_dead(
    backend: pytest.FixtureRequest, paths: HomePaths
) -> None:
    env = database_env(backend)
    async with engine_api(backend, paths, workers=1) as api:
        processes = {
            name: await asyncio.to_thread(start_worker, paths, env, name)
            for name in ("drained", "killed")
        }
        try:
            await workers_until(
                api, lambda w: all(w.get(n, {}).get("status") == "active" for n in processes)
            )
            processes["drained"].send_signal(signal.SIGTERM)
            out, _ = await asyncio.to_thread(processes["drained"].communicate, timeout=30)
            assert processes["drained"].returncode == 0, out
            processes["killed"].send_signal(signal.SIGKILL)
            await asyncio.to_thread(processes["killed"].wait, timeout=10)

            # The engine's worker sweeps: the killed one is dead a lease after its last beat.
            listed = await workers_until(api, lambda w: w["killed"]["status"] == "dead")
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
        workers = {worker["id"]: worker for worker in listed["workers"]}
        assert {name: (w["status"], w["health"]) for name, w in workers.items()} == {
            default_worker_id(): ("active", "healthy"),  # the engine's own
            "drained": ("stopped", "stopped"),
            "killed": ("dead", "dead"),
        }
        assert (workers["drained"]["active_jobs"], workers["killed"]["active_jobs"]) == (0, 0)
        assert listed["summary"] == {"healthy": 1, "warning": 0, "dead": 1, "stopped": 1}
        stopped = (await api.get("/api/v1/admin/workers", params={"status": "stopped"})).json()
        assert [worker["id"] for worker in stopped["workers"]] == ["drained"]
        metrics = (await api.get("/api/v1/admin/metrics")).json()
        assert metrics["workers"] == {
            "by_status": {"active": 1, "draining": 0, "stopped": 1, "dead": 1},
            "total": 3,
        }


async def test_the_engines_own_worker_is_stopped_when_the_engine_stops(
    backend: pytest.FixtureRequest, paths: HomePaths
) -> None:
    async with engine_api(backend, paths, workers=1) as api:
        await workers_until(api, lambda w: default_worker_id() in w)
    # The next engine runs no worker of its own (it would have the same id: this process's).
    async with engine_api(backend, paths, workers=0) as api:
        listed = (await api.get("/api/v1/admin/workers")).json()
    assert [(w["id"], w["status"], w["health"]) for w in listed["workers"]] == [
        (default_worker_id(), "stopped", "stopped")
    ]
