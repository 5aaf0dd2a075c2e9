"""Shared fixtures: a temporary home, an engine in-process, and a real engine subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import settings as hypothesis_settings

from claybot.config.home import HomePaths
from claybot.engine.engine import Engine, EngineOptions
from claybot.kernel.events import Event
from claybot.net.egress import EgressProxy
from claybot.server.app import create_app
from tests.installed_metadata import use_declared_entry_points

# Before any engine (or catalog) is built: the built-in plugins are entry points.
use_declared_entry_points()

# Property tests assert behaviour, never speed (benchmarks do that): on a shared machine
# one example held up by a disk sync or a collection took 396 ms and failed a whole run
# on hypothesis's 200 ms deadline. Each test's own @settings still applies on top.
hypothesis_settings.register_profile("claybot", deadline=None)
hypothesis_settings.load_profile("claybot")

# No network beyond loopback, and a watch on the event loop: see tests/guards.py.
pytest_plugins = ["tests.guards", "tests.databases"]

ECHO_SETTINGS: dict[str, Any] = {"providers": [{"id": "scripted", "model": "echo"}]}


def write_settings(paths: HomePaths, settings: dict[str, Any]) -> None:
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.settings.write_text(json.dumps(settings))


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[HomePaths]:
    # Unix socket paths are limited to ~107 bytes; pytest's tmp paths can be long.
    short = Path(f"/tmp/cb-{os.getpid()}-{tmp_path.name[-20:]}")
    short.mkdir(parents=True, exist_ok=True)
    yield HomePaths(short)
    subprocess.run(["rm", "-rf", str(short)], check=False)


@pytest.fixture
async def engine(paths: HomePaths) -> AsyncIterator[Engine]:
    write_settings(paths, ECHO_SETTINGS)
    engine = Engine(paths, EngineOptions(port=0))
    await engine.start()
    yield engine
    await engine.stop(drain_timeout_s=2)


@asynccontextmanager
async def running_engine(
    paths: HomePaths, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Engine, httpx.AsyncClient, list[Event]]]:
    """An engine on ``paths`` (settings already written), its API in-process, its events;
    ``env``: the environment it is given instead of the process's."""
    options = EngineOptions(port=0) if env is None else EngineOptions(port=0, env=env)
    engine = Engine(paths, options)
    events: list[Event] = []
    engine.events.add_listener(events.append)
    await engine.start()
    try:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as api:
            yield engine, api, events
    finally:
        await engine.stop()


@asynccontextmanager
async def engine_on_backend(
    request: pytest.FixtureRequest,
    paths: HomePaths,
    settings: dict[str, Any],
    env: dict[str, str] | None = None,
    egress: EgressProxy | None = None,
) -> AsyncIterator[Engine]:
    """An engine with ``settings`` on the database ``request.param`` names: "sqlite" (the
    home's) or "postgres" (a new PostgreSQL database for this test); ``egress``: its jobs'
    egress proxy, when the test gives its own."""
    write_settings(paths, settings)
    env = {"PATH": "/usr/bin:/bin", **(env or {})}
    if request.param == "postgres":
        env["CLAYBOT_DATABASE_URL"] = request.getfixturevalue("fresh_postgres_url")
    engine = Engine(paths, EngineOptions(port=0, env=env, egress=egress))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop(drain_timeout_s=2)


@pytest.fixture
async def api(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://claybot") as client:
        yield client


# How long a started engine may take to answer: seconds on a quiet machine, but with the
# suite on both cores and other work beside it (load average 15) angine's module engine
# took over 30 s, and every test of the module on that worker errored.
START_TIMEOUT_S = 120.0


class EngineProcess:
    """``claybot start`` as a real subprocess on a temporary home."""

    def __init__(self, paths: HomePaths, extra_env: dict[str, str] | None = None) -> None:
        self.paths = paths
        self.env = {**os.environ, "CLAYBOT_HOME": str(paths.home), **(extra_env or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = paths.home.parent / f"{paths.home.name}-engine.log"

    def start(self, timeout_s: float = START_TIMEOUT_S, port: int = 0) -> None:
        """``port``: the TCP port (0: a free one the engine picks)."""
        self.paths.socket.unlink(missing_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "claybot", "start", "--port", str(port)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"engine exited with {self.process.returncode}: {self.output()}")
            if self.paths.pid.exists() and self.paths.socket.exists():
                try:
                    with self.client() as client:
                        if client.get("/v1/engine/status").status_code == 200:
                            return
                except httpx.TransportError:
                    pass
            time.sleep(0.02)
        raise TimeoutError(f"engine did not become ready: {self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def client(self, timeout_s: float = 30.0) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.paths.socket))
        return httpx.Client(transport=transport, base_url="http://claybot", timeout=timeout_s)

    def async_client(self, timeout_s: float = 30.0) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=str(self.paths.socket))
        return httpx.AsyncClient(transport=transport, base_url="http://claybot", timeout=timeout_s)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout_s: float = 30.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)


@pytest.fixture
def engine_process(paths: HomePaths) -> Iterator[EngineProcess]:
    write_settings(paths, ECHO_SETTINGS)
    process = EngineProcess(paths)
    yield process
    if process.process is not None and process.process.poll() is None:
        process.kill()
