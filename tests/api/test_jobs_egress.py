"""A job that allows the network, created over the TCP API of a real engine (its model a
fake OpenAI-compatible server): its ``run_python`` reaches the public internet through
the egress proxy and nothing else. Not the engine's database (TCP or Unix socket), not the
engine's own API, not loopback, private or link-local addresses, whether the script
connects itself or asks the proxy."""

from __future__ import annotations

import asyncio
import glob
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from claybot.api.tcp_auth import ApiKeyMiddleware
from claybot.config.home import HomePaths
from claybot.net.egress import EgressProxy
from claybot.server.app import create_app
from tests.conftest import EngineProcess, engine_on_backend, write_settings
from tests.jobs.egress_probe import (
    PUBLIC_HOST,
    Plan,
    assert_public_reached,
    connections_seen,
    public_proxy,
    public_server,
    refused_by_the_proxy,
    report_of,
    silent_listener,
)
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.loopback import LoopbackServer

SETTINGS = {
    "providers": [{"id": "openai", "model": "gpt-fake", "options": {"maxRetries": 0}}],
    "jobs": {"workers": 1},
}
# Where Debian's PostgreSQL (the suite's, at 127.0.0.1:5432) keeps its Unix socket.
POSTGRES_SOCKETS = "/run/postgresql/.s.PGSQL.*"


@pytest.fixture
def vendor() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with LoopbackServer(fake):
        yield fake


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> pytest.FixtureRequest:
    """Its ``param`` names the engine's database (``engine_on_backend`` reads it)."""
    return request


async def run_probe(
    client: httpx.AsyncClient, vendor: FakeOpenAI, plan: Plan
) -> tuple[dict[str, Any], str]:
    """A job that allows the network runs ``plan``'s script; its report (an artifact,
    downloaded) and the run_python result the model was sent."""
    vendor.reply_tool_calls(("c1", "run_python", {"code": plan.script()}))
    vendor.reply_tool_calls(("c2", "final_answer", {"answer": "Probed."}))
    created = await client.post(
        "/api/v1/jobs",
        json={"task": "probe the network", "hitl_mode": "auto_execute", "allow_network": True},
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    async with asyncio.timeout(60):
        while True:
            job: dict[str, Any] = (await client.get(f"/api/v1/jobs/{job_id}")).json()
            if job["status"] in ("completed", "failed"):
                break
            await asyncio.sleep(0.05)
    [output] = [m["content"] for m in vendor.requests[1].body["messages"] if m["role"] == "tool"]
    assert job["status"] == "completed", (job, output)
    [artifact] = [a for a in job["artifacts"] if a["filename"] == "report.json"]
    return report_of((await client.get(artifact["url"])).text), output


@pytest.fixture
def engine_on_postgres(
    paths: HomePaths, vendor: FakeOpenAI, fresh_postgres_url: str
) -> Iterator[EngineProcess]:
    """``claybot start`` with its database on the PostgreSQL at 127.0.0.1:5432."""
    write_settings(paths, SETTINGS)
    engine = EngineProcess(
        paths,
        {
            "PATH": "/usr/bin:/bin",
            "CLAYBOT_DATABASE_URL": fresh_postgres_url,
            "OPENAI_API_KEY": "sk-fake",
            "OPENAI_BASE_URL": vendor.api_base,
        },
    )
    engine.start()
    yield engine
    engine.terminate()


async def test_a_job_with_the_network_reaches_no_loopback_private_or_link_local_address(
    engine_on_postgres: EngineProcess, paths: HomePaths, vendor: FakeOpenAI
) -> None:
    ours, other = silent_listener("127.0.0.1"), silent_listener("127.0.0.2")
    postgres_sockets = glob.glob(POSTGRES_SOCKETS)
    assert postgres_sockets, f"PostgreSQL's Unix socket is not at {POSTGRES_SOCKETS}"
    async with engine_on_postgres.async_client() as owner:
        api = (await owner.get("/v1/engine/status")).json()["tcp"]["port"]
        made = await owner.post(
            "/api/v1/admin/keys",
            json={
                "name": "prober",
                "scopes": ["jobs:read", "jobs:write"],
                "rate_limit_rpm": 10_000,
            },
        )
        key = made.json()["key"]
    first, second = ours.getsockname()[1], other.getsockname()[1]
    plan = Plan(
        direct=[
            ("127.0.0.1", first),
            ("127.0.0.2", second),
            ("127.0.0.1", 5432),
            ("127.0.0.1", api),
        ],
        proxied=[
            f"http://127.0.0.1:{first}/",
            f"https://127.0.0.1:{first}/",  # CONNECT
            f"http://127.0.0.2:{second}/",
            f"https://127.0.0.2:{second}/",
            "http://127.0.0.1:5432/",
            "https://127.0.0.1:5432/",
            f"http://127.0.0.1:{api}/api/v1/admin/keys",
            f"http://localhost:{api}/api/v1/jobs",  # a name that resolves inward
            f"http://[::1]:{first}/",
            "http://10.0.0.1/",
            "https://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
        ],
        unix=[*postgres_sockets, str(paths.socket)],
    )
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{api}", headers={"authorization": f"Bearer {key}"}
        ) as client:
            report, output = await run_probe(client, vendor, plan)
    finally:
        seen = connections_seen(ours), connections_seen(other)
        ours.close()
        other.close()

    # Connects fail in the job's own namespace: nothing listens there.
    assert all(
        outcome.startswith("ConnectionRefusedError") for outcome in report["direct"].values()
    ), (report["direct"], output)
    rules = {url: "loopback" for url in plan.proxied}
    rules.update({u: "private" for u in plan.proxied if "10.0.0.1" in u})
    rules.update({u: "link-local" for u in plan.proxied if "169.254" in u})
    assert {
        url: refused_by_the_proxy(outcome, rules[url]) for url, outcome in report["proxied"].items()
    } == dict.fromkeys(plan.proxied, True), (report["proxied"], output)
    # PostgreSQL's socket is not in the sandbox (its /run is its own); the engine's own
    # is covered by /dev/null.
    assert {path: outcome.split(":")[0] for path, outcome in report["unix"].items()} == {
        **dict.fromkeys(postgres_sockets, "FileNotFoundError"),
        str(paths.socket): "ConnectionRefusedError",
    }
    assert seen == (0, 0)


@asynccontextmanager
async def job_engine(
    backend: pytest.FixtureRequest, paths: HomePaths, vendor: FakeOpenAI, egress: EgressProxy
) -> AsyncIterator[httpx.AsyncClient]:
    """An engine in this process with its jobs' proxy ``egress``, and a client of its TCP
    application (the key middleware in front) with a key that may run jobs."""
    env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": vendor.api_base}
    async with engine_on_backend(backend, paths, SETTINGS, env, egress) as engine:
        _, key = await engine.keys.create("prober", ["jobs:read", "jobs:write"], 10_000)
        app = ApiKeyMiddleware(create_app(engine), engine.keys)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://claybot",
            headers={"authorization": f"Bearer {key}"},
        ) as client:
            yield client


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_job_reaches_a_public_address_through_the_proxy_by_get_and_by_connect(
    backend: pytest.FixtureRequest, paths: HomePaths, vendor: FakeOpenAI
) -> None:
    ours = silent_listener("127.0.0.1")
    try:
        async with (
            public_server() as (port, seen),
            job_engine(backend, paths, vendor, public_proxy()) as client,
        ):
            plan = Plan(
                public=(PUBLIC_HOST, port),
                proxied=[f"http://127.0.0.1:{ours.getsockname()[1]}/"],  # still loopback
            )
            report, _ = await run_probe(client, vendor, plan)
    finally:
        leaked = connections_seen(ours)
        ours.close()

    assert_public_reached(report, port, seen)
    [refused] = report["proxied"].values()
    assert refused_by_the_proxy(refused, "loopback"), refused
    assert leaked == 0
    tools = {t["function"]["name"]: t["function"] for t in vendor.requests[0].body["tools"]}
    assert "public internet through an HTTP proxy" in tools["run_python"]["description"]
