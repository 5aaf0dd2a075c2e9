"""Where the database is, how it is opened, and migrations (on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from claybot.config.home import HomePaths
from claybot.db.database import (
    HEAD_REVISION,
    alembic_config,
    create_database_engine,
    current_revision,
    database_url,
    migrate,
)
from claybot.db.errors import StoreError
from claybot.db.tables import described_here, metadata


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ("postgres://u:p@db:5432/claybot", "postgresql+asyncpg://u:p@db:5432/claybot"),
        ("postgresql://u@db/claybot", "postgresql+asyncpg://u@db/claybot"),
        ("postgresql+asyncpg://u@db/claybot", "postgresql+asyncpg://u@db/claybot"),
        ("  postgres://u@db/c\n", "postgresql+asyncpg://u@db/c"),
        ("sqlite+aiosqlite:////srv/claybot.db", "sqlite+aiosqlite:////srv/claybot.db"),
    ],
)
def test_the_configured_url_wins_with_the_async_driver(configured: str, expected: str) -> None:
    paths = HomePaths(Path("/home/me/.claybot"))
    assert database_url(paths, {"CLAYBOT_DATABASE_URL": configured}) == expected


def test_without_configuration_sqlite_in_the_home() -> None:
    paths = HomePaths(Path("/home/me/.claybot"))
    expected = "sqlite+aiosqlite:////home/me/.claybot/claybot.db"
    assert database_url(paths, {}) == expected
    assert database_url(paths, {"CLAYBOT_DATABASE_URL": "  "}) == expected


async def test_sqlite_connections_use_wal_a_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    engine = create_database_engine(f"sqlite+aiosqlite:///{tmp_path}/claybot.db")
    try:
        async with engine.connect() as connection:
            pragma = {
                name: (await connection.exec_driver_sql(f"PRAGMA {name}")).scalar()
                for name in ("journal_mode", "busy_timeout", "foreign_keys")
            }
    finally:
        await engine.dispose()
    assert pragma == {"journal_mode": "wal", "busy_timeout": 30000, "foreign_keys": 1}


async def test_migrate_twice_is_idempotent(empty_database_url: str) -> None:
    engine = create_database_engine(empty_database_url)
    try:
        assert await current_revision(engine) is None
        await migrate(engine)
        assert await current_revision(engine) == HEAD_REVISION
        await migrate(engine)
        assert await current_revision(engine) == HEAD_REVISION
        async with engine.connect() as connection:
            count = (await connection.execute(text("SELECT count(*) FROM api_keys"))).scalar()
            versions = (
                await connection.execute(text("SELECT count(*) FROM alembic_version"))
            ).scalar()
        assert (count, versions) == (0, 1)
    finally:
        await engine.dispose()


async def test_processes_migrating_a_new_database_at_once_both_succeed(
    empty_database_url: str,
) -> None:
    # The engine and `claybot worker`s may boot together on a database nobody migrated.
    engines = [create_database_engine(empty_database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(migrate(engine) for engine in engines))
        assert await current_revision(engines[0]) == HEAD_REVISION
    finally:
        for engine in engines:
            await engine.dispose()


async def test_a_schema_from_a_newer_claybot_is_refused(empty_database_url: str) -> None:
    engine = create_database_engine(empty_database_url)
    try:
        await migrate(engine)
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(StoreError, match=r"revision '9999'.*newer ClayBot"):
            await migrate(engine)
    finally:
        await engine.dispose()


async def test_the_tables_and_the_migrations_agree(empty_database_url: str) -> None:
    """A table changed in tables.py without a migration (or the reverse) fails here."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = create_database_engine(empty_database_url)
    try:
        await migrate(engine)

        def differences(connection: Any) -> list[Any]:
            context = MigrationContext.configure(
                connection, opts={"include_object": described_here}
            )
            return list(compare_metadata(context, metadata))

        async with engine.connect() as connection:
            assert await connection.run_sync(differences) == []
    finally:
        await engine.dispose()


def test_the_head_revision_constant_is_the_newest_migration() -> None:
    from alembic.script import ScriptDirectory

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


async def test_migrate_on_a_current_sqlite_database_is_cheap(tmp_path: Path) -> None:
    # Boot calls migrate every time; it must not run alembic's machinery when current.
    engine = create_database_engine(f"sqlite+aiosqlite:///{tmp_path}/claybot.db")
    try:
        await migrate(engine)
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            await migrate(engine)
            timings.append(time.perf_counter() - started)
    finally:
        await engine.dispose()
    assert statistics.median(timings) < 0.05, timings


async def test_an_unreachable_database_is_a_store_error_that_hides_the_password() -> None:
    engine = create_database_engine("postgresql+asyncpg://claybot:hunter2@127.0.0.1:1/claybot")
    try:
        with pytest.raises(StoreError, match="checking the database schema failed") as caught:
            await migrate(engine)
        assert "hunter2" not in str(caught.value)
    finally:
        await engine.dispose()


async def test_alembic_can_be_driven_by_hand_without_an_ini_file(tmp_path: Path) -> None:
    """What a developer does to write the next migration: env.py opens its own engine."""
    from alembic import command

    url = f"sqlite+aiosqlite:///{tmp_path}/by-hand.db"
    await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
    engine = create_database_engine(url)
    try:
        assert await current_revision(engine) == HEAD_REVISION
        await migrate(engine)  # and the engine agrees
    finally:
        await engine.dispose()


async def test_migration_0006_lets_a_worker_be_stopped_and_keeps_the_rows(
    empty_database_url: str,
) -> None:
    """A database of 0005 with workers in it: after the upgrade a worker may be
    ``stopped``, the rows are all there, and the constraint still refuses nonsense;
    the downgrade turns ``stopped`` back into ``dead``."""
    from alembic import command
    from sqlalchemy.exc import IntegrityError

    config = alembic_config(empty_database_url)
    await asyncio.to_thread(command.upgrade, config, "0005")
    row = (
        "INSERT INTO workers (id, hostname, pid, version, status, active_jobs, last_heartbeat,"
        " created_at) VALUES (:id, 'h', 1, '1', :status, 0, :at, :at)"
    )
    at = datetime(2026, 11, 28, tzinfo=UTC)
    engine = create_database_engine(empty_database_url)
    try:
        async with engine.begin() as connection:
            for worker_id, status in (("w-active", "active"), ("w-dead", "dead")):
                await connection.execute(text(row), {"id": worker_id, "status": status, "at": at})
        await migrate(engine)
        assert await current_revision(engine) == HEAD_REVISION
        async with engine.begin() as connection:
            await connection.execute(text(row), {"id": "w-stopped", "status": "stopped", "at": at})
        with pytest.raises(IntegrityError):
            async with engine.begin() as connection:
                await connection.execute(text(row), {"id": "w-x", "status": "zombie", "at": at})
        statuses = "SELECT id, status FROM workers ORDER BY id"
        async with engine.connect() as connection:
            listed = (await connection.execute(text(statuses))).all()
        assert [tuple(r) for r in listed] == [
            ("w-active", "active"),
            ("w-dead", "dead"),
            ("w-stopped", "stopped"),
        ]
        await engine.dispose()  # SQLite: the downgrade copies the table, on its own engine
        await asyncio.to_thread(command.downgrade, config, "0005")
        async with engine.connect() as connection:
            listed = (await connection.execute(text(statuses))).all()
        assert [tuple(r) for r in listed] == [
            ("w-active", "active"),
            ("w-dead", "dead"),
            ("w-stopped", "dead"),
        ]
    finally:
        await engine.dispose()
