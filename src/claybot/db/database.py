"""Opening the database and bringing its schema to the current revision."""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from claybot.db.errors import StoreError, wrap_database_errors
from claybot.db.location import database_url, redact_url

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
# The newest migration; a test checks it against the migrations folder. Knowing it
# lets boot skip importing alembic when the schema is already current.
HEAD_REVISION = "0008"
# How long a SQLite writer waits for another one (the engine, `claybot worker`s) to finish.
SQLITE_BUSY_TIMEOUT_S = 30
# PostgreSQL advisory lock taken while migrating, so two processes booting at once
# on a new database do not both create the tables. ("clay" in ASCII.)
MIGRATION_LOCK_ID = 0x636C6179
# Alembic keeps the running migration in module globals: two migrations in one
# process (even of different databases) must not interleave at their awaits.
_process_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def json_text(value: Any) -> str:
    """A JSON column's value as text: orjson's, several times quicker than json's (the
    job writer serialises every record it stores, on the thread every job waits for;
    json's encoder was a tenth of that thread's time); json's for what orjson refuses
    (integers past 64 bits, keys that are not strings), so whatever json could store
    still stores. Read back with json's own loads: orjson reads a large integer as a
    float."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def create_database_engine(url: str, **options: Any) -> AsyncEngine:
    """An async engine; on SQLite every connection gets WAL, a busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        engine = create_async_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
            json_serializer=json_text,
            **options,
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True, json_serializer=json_text, **options)


def create_sync_engine(async_engine: AsyncEngine) -> Engine:
    """A synchronous engine on the same database, for work done on a thread of its own
    (the job store's writer): pysqlite for SQLite, psycopg for PostgreSQL."""
    url = async_engine.url
    if url.get_backend_name() == "sqlite":
        engine = create_engine(
            url.set(drivername="sqlite"),
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            json_serializer=json_text,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        # pysqlite starts transactions on its own, late, and not at all for SAVEPOINT;
        # the writer's savepoints need SQLAlchemy to say BEGIN itself (SQLAlchemy's
        # documented recipe). IMMEDIATE takes the write lock at once, so two processes
        # writing one file wait in the busy handler instead of failing to upgrade.
        event.listen(engine, "connect", _autocommit_driver)
        event.listen(engine, "begin", _begin_immediate)
        return engine
    return create_engine(
        url.set(drivername="postgresql+psycopg"), pool_pre_ping=True, json_serializer=json_text
    )


def _autocommit_driver(connection: Any, _record: Any) -> None:
    connection.isolation_level = None


def _begin_immediate(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
    _use_wal(cursor)
    # FULL: a commit is on disk when it returns, as PostgreSQL's are (NORMAL loses the
    # last commits to a power cut). The job writer's group commit pays it once a batch.
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the file to WAL once; the mode is stored in the file, so later connections see it."""
    cursor.execute("PRAGMA journal_mode")
    if cursor.fetchone()[0] == "wal":
        return
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
    except Exception as exc:
        # A new file that another connection is writing to right now (SQLite does not
        # wait for the switch): that connection or the next one makes it WAL.
        if "locked" not in str(exc):
            raise
        log.debug("SQLite busy; WAL left for the next connection", extra={"action": "db.wal_later"})


def alembic_config(url: str | None = None) -> Config:
    """Alembic's configuration without an alembic.ini (``url`` for running alembic by hand)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def current_revision(engine: AsyncEngine) -> str | None:
    """The schema revision stored in the database; None for a database never migrated."""
    async with engine.connect() as connection:
        try:
            result = await connection.execute(text("SELECT version_num FROM alembic_version"))
        except (OperationalError, ProgrammingError):  # no such table: a new database
            return None
        row = result.first()
        return str(row[0]) if row else None


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to head; about a millisecond when it already is (no alembic import).

    Raises StoreError if the database is unreachable, or was migrated by a newer
    ClayBot than this one.
    """
    async with wrap_database_errors("checking the database schema"):
        if await current_revision(engine) == HEAD_REVISION:
            return
    lock = _process_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with (
        lock,
        wrap_database_errors("migrating the database"),
        engine.connect() as connection,
    ):
        await _lock_for_migration(connection)
        # Alembic reads the revision again under the lock: whoever waited finds it current.
        await connection.run_sync(_upgrade)
        await connection.commit()
    log.info("database migrated", extra={"action": "db.migrated", "revision": HEAD_REVISION})


async def _lock_for_migration(connection: AsyncConnection) -> None:
    dialect = connection.dialect.name
    if dialect == "postgresql":
        # Held until the transaction ends; PostgreSQL's DDL is transactional.
        await connection.execute(
            text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID}
        )
    elif dialect == "sqlite":
        # Take the write lock before reading the revision, not at the first CREATE.
        await connection.exec_driver_sql("BEGIN IMMEDIATE")


def _upgrade(connection: Any) -> None:
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    config = alembic_config()
    known = {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}
    current = MigrationContext.configure(connection).get_current_revision()
    if current is not None and current not in known:
        raise StoreError(
            f"the database schema is at revision {current!r}, which this ClayBot does not "
            f"know (its newest is {HEAD_REVISION!r}): a newer ClayBot migrated it; "
            "upgrade ClayBot, or point CLAYBOT_DATABASE_URL at another database"
        )
    config.attributes["connection"] = connection
    try:
        command.upgrade(config, "head")
    except CommandError as exc:  # e.g. a broken migrations folder in this install
        raise StoreError(f"alembic could not migrate: {exc}") from exc


__all__ = [
    "HEAD_REVISION",
    "StoreError",
    "alembic_config",
    "create_database_engine",
    "current_revision",
    "database_url",
    "migrate",
    "redact_url",
]
