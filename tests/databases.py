"""Database fixtures (a pytest plugin, see tests/conftest.py): a temporary SQLite file,
and PostgreSQL databases made for this run.

The PostgreSQL server comes from CLAYBOT_TEST_POSTGRES_URL (default: the local
server's `test` database, which is only used to create and drop ours). Tests never
write to that database: the session gets a database of its own, dropped at the end,
and tests that need an empty one get another. When no server answers, PostgreSQL
tests skip with a printed reason, unless CLAYBOT_REQUIRE_POSTGRES is set (CI sets
it): then they fail.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from claybot.db.database import create_database_engine, migrate

DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", "postgres"]


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


def create_postgres_database() -> str:
    """A new empty database on the test server; skips (or fails) if there is none."""
    import asyncpg

    name = f"claybot_test_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        _admin_sql(f'CREATE DATABASE "{name}"')
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        reason = f"PostgreSQL at {_server_url()} is not usable ({type(exc).__name__}: {exc})"
        if os.environ.get("CLAYBOT_REQUIRE_POSTGRES"):
            pytest.fail(f"{reason} and CLAYBOT_REQUIRE_POSTGRES is set")
        print(f"\nskipping PostgreSQL tests: {reason}")
        pytest.skip(reason)
    base, _, _ = _server_url().rpartition("/")
    return f"{base}/{name}"


def drop_postgres_database(url: str) -> None:
    name = url.rpartition("/")[2]
    _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A database for the whole session (migrated by the first test that opens it)."""
    url = create_postgres_database()
    yield url
    drop_postgres_database(url)


@pytest.fixture
def fresh_postgres_url() -> Iterator[str]:
    """A new empty PostgreSQL database for one test (one that lists what it made, say)."""
    url = create_postgres_database()
    yield url
    drop_postgres_database(url)


def url_for(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/claybot.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(params=BACKENDS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to a database nothing has touched yet (a new one per test)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/fresh.db"
        return
    url = create_postgres_database()
    yield url
    drop_postgres_database(url)


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A migrated database with nothing in it."""
    async for engine in open_database(url_for(request.param, request, tmp_path)):
        yield engine


async def open_database(url: str) -> AsyncIterator[Any]:
    engine = create_database_engine(url)
    await migrate(engine)
    from sqlalchemy import delete

    from claybot.db.tables import metadata

    async with engine.begin() as connection:
        # The PostgreSQL database lives all session: each test starts with empty tables.
        for table in reversed(metadata.sorted_tables):
            await connection.execute(delete(table))
    yield engine
    await engine.dispose()
