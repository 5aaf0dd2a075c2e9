"""Alembic environment: run with the connection the engine hands over."""

from __future__ import annotations

from alembic import context

from claybot.db.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through claybot.db.database.migrate")
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
