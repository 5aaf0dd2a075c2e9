"""Database fixtures: a temporary SQLite file and a fresh PostgreSQL database per session.

PostgreSQL tests skip with a printed reason when no server answers, unless
CLAYBOT_REQUIRE_POSTGRES is set (CI sets it), in which case they fail.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from claybot.db.database import create_database_engine, migrate

DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def _server_url() -> str:
    return os.environ.get("CLAYBOT_TEST_POSTGRES_URL", DEFAULT_POSTGRES)


def _admin_sql(sql: str) -> None:
    """Run on a thread of its own: the fixture may be first needed inside a running loop."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _admin(sql)).result()


async def _admin(sql: str) -> None:
    import asyncpg

    dsn = _server_url().replace("postgresql+asyncpg://", "postgresql://")
    connection = await asyncpg.connect(dsn, timeout=5)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    name = f"claybot_test_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        _admin_sql(f'CREATE DATABASE "{name}"')
    except (TimeoutError, OSError, ConnectionError) as exc:
        reason = f"PostgreSQL at {_server_url()} is not reachable ({exc})"
        if os.environ.get("CLAYBOT_REQUIRE_POSTGRES"):
            pytest.fail(f"{reason} and CLAYBOT_REQUIRE_POSTGRES is set")
        print(f"\nskipping PostgreSQL tests: {reason}")
        pytest.skip(reason)
    base, _, _ = _server_url().rpartition("/")
    yield f"{base}/{name}"
    _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def url_for(backend: str, request: pytest.FixtureRequest, tmp_path: object) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/claybot.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[object]:
    async for engine in open_database(url_for(request.param, request, tmp_path)):
        yield engine


async def open_database(url: str) -> AsyncIterator[object]:
    engine = create_database_engine(url)
    await migrate(engine)
    from sqlalchemy import delete

    from claybot.db.tables import api_keys

    async with engine.begin() as connection:
        await connection.execute(delete(api_keys))  # PostgreSQL is shared by the session
    yield engine
    await engine.dispose()
