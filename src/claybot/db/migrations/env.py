"""Alembic environment.

The engine runs migrations through ``claybot.db.database.migrate``, which hands
over a connection it already holds (under a lock, in a transaction). Developers
can also drive alembic with ``claybot.db.database.alembic_config(url)``, e.g.
``command.revision(alembic_config(url), "add jobs", autogenerate=True)``; then
this file opens its own async engine on that URL.
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

from claybot.db.tables import described_here, metadata


def _configure(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        include_object=described_here,
        # SQLite alters a table by copying it; autogenerate must write batch operations.
        render_as_batch=connection.dialect.name == "sqlite",
    )


def _run(connection: Any) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_on_own_engine(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


def _main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: use claybot.db.database.alembic_config(url)")
    if context.is_offline_mode():  # `--sql`: print the SQL instead of running it
        context.configure(
            url=url,
            target_metadata=metadata,
            include_object=described_here,
            literal_binds=True,
            dialect_opts={"paramstyle": "named"},
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    asyncio.run(_run_on_own_engine(url))


_main()
