"""The shared tables (SQLAlchemy Core). Later features add theirs here, with a migration."""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, DateTime, Integer, MetaData, String, Table

metadata = MetaData()

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("prefix", String(16), nullable=False, index=True),
    Column("key_hash", String(64), nullable=False, unique=True),  # SHA-256 hex; never the key
    Column("name", String(128), nullable=False),
    Column("scopes", JSON, nullable=False),
    Column("rate_limit_rpm", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("usage_count", Integer, nullable=False, default=0),
    Column("revoked", Boolean, nullable=False, default=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)
