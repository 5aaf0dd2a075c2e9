"""The shared tables (SQLAlchemy Core). Later features add theirs here, with a migration.

Every constraint and index gets a predictable name: later migrations on SQLite
(which rebuilds a table to alter it) can only drop or change constraints they
can name. A test checks that these tables and the migrations agree.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    false,
    text,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("prefix", String(16), nullable=False, index=True),  # the first 12 chars, for display
    Column("key_hash", String(64), nullable=False, unique=True),  # SHA-256 hex; never the key
    Column("name", String(128), nullable=False),
    Column("scopes", JSON, nullable=False),  # a list of scope names
    Column("rate_limit_rpm", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),  # UTC
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("usage_count", Integer, nullable=False, default=0, server_default=text("0")),
    Column("revoked", Boolean, nullable=False, default=False, server_default=false()),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)
