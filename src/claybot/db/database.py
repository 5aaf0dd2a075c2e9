"""Opening the database and bringing its schema to the current revision."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from claybot.db.errors import StoreError, wrap_database_errors
from claybot.db.location import database_url, redact_url

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
# The newest migration; a test checks it against the migrations folder. Knowing it
# lets boot skip importing alembic when the schema is already current.
HEAD_REVISION = "0001"


def create_database_engine(url: str, **options: Any) -> AsyncEngine:
    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": 30}, **options)

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_async_engine(url, pool_pre_ping=True, **options)


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as connection:
        try:
            result = await connection.execute(text("SELECT version_num FROM alembic_version"))
        except Exception:  # no table yet: a new database
            return None
        row = result.first()
        return str(row[0]) if row else None


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to head; cheap when it already is."""
    async with wrap_database_errors("checking the database schema"):
        if await current_revision(engine) == HEAD_REVISION:
            return
    async with wrap_database_errors("migrating the database"), engine.begin() as connection:
        await connection.run_sync(_upgrade)
    log.info("database migrated", extra={"action": "db.migrated", "revision": HEAD_REVISION})


def _upgrade(connection: Any) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


__all__ = ["StoreError", "create_database_engine", "database_url", "migrate", "redact_url"]
