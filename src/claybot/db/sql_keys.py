"""The API key store on SQLite or PostgreSQL (SQLAlchemy Core)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from claybot.db.errors import wrap_database_errors
from claybot.db.keys import (
    DISPLAY_PREFIX_CHARS,
    KEY_PREFIX,
    ApiKeyRecord,
    Clock,
    hash_key,
    new_plaintext_key,
    utcnow,
    validate_scopes,
)
from claybot.db.tables import api_keys
from claybot.kernel.ids import new_id


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands datetimes back naive; they were written in UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _record(row: Any) -> ApiKeyRecord:
    created = _aware(row.created_at)
    assert created is not None
    return ApiKeyRecord(
        id=row.id,
        prefix=row.prefix,
        name=row.name,
        scopes=tuple(row.scopes),
        rate_limit_rpm=row.rate_limit_rpm,
        created_at=created,
        last_used_at=_aware(row.last_used_at),
        usage_count=row.usage_count,
        revoked=bool(row.revoked),
        revoked_at=_aware(row.revoked_at),
    )


class SqlApiKeyStore:
    def __init__(self, engine: AsyncEngine, clock: Clock = utcnow) -> None:
        self._engine = engine
        self._clock = clock

    async def create(
        self, name: str, scopes: Iterable[str], rate_limit_rpm: int = 60
    ) -> tuple[ApiKeyRecord, str]:
        chosen = validate_scopes(scopes)
        plaintext = new_plaintext_key()
        record = ApiKeyRecord(
            id=new_id(),
            prefix=plaintext[:DISPLAY_PREFIX_CHARS],
            name=name,
            scopes=chosen,
            rate_limit_rpm=rate_limit_rpm,
            created_at=self._clock(),
            last_used_at=None,
            usage_count=0,
            revoked=False,
            revoked_at=None,
        )
        async with wrap_database_errors("creating an API key"), self._engine.begin() as connection:
            await connection.execute(
                api_keys.insert().values(
                    id=record.id,
                    prefix=record.prefix,
                    key_hash=hash_key(plaintext),
                    name=name,
                    scopes=list(chosen),
                    rate_limit_rpm=rate_limit_rpm,
                    created_at=record.created_at,
                    usage_count=0,
                    revoked=False,
                )
            )
        return record, plaintext

    async def list(self) -> list[ApiKeyRecord]:
        async with wrap_database_errors("listing API keys"), self._engine.connect() as connection:
            rows = await connection.execute(select(api_keys).order_by(api_keys.c.created_at))
            return [_record(row) for row in rows]

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        async with wrap_database_errors("reading an API key"), self._engine.connect() as connection:
            row = (
                await connection.execute(select(api_keys).where(api_keys.c.id == key_id))
            ).first()
            return _record(row) if row else None

    async def revoke(self, id_or_prefix: str) -> ApiKeyRecord | None:
        async with wrap_database_errors("revoking an API key"), self._engine.begin() as connection:
            match = or_(api_keys.c.id == id_or_prefix, api_keys.c.prefix == id_or_prefix)
            rows = (await connection.execute(select(api_keys).where(match))).all()
            if len(rows) != 1:
                return None  # unknown, or a prefix that names several keys
            row = rows[0]
            if not row.revoked:
                await connection.execute(
                    update(api_keys)
                    .where(api_keys.c.id == row.id)
                    .values(revoked=True, revoked_at=self._clock())
                )
            updated = (
                await connection.execute(select(api_keys).where(api_keys.c.id == row.id))
            ).one()
            return _record(updated)

    async def verify(self, plaintext: str) -> ApiKeyRecord | None:
        if not plaintext.startswith(KEY_PREFIX):
            return None
        async with (
            wrap_database_errors("checking an API key"),
            self._engine.connect() as connection,
        ):
            query = select(api_keys).where(api_keys.c.key_hash == hash_key(plaintext))
            row = (await connection.execute(query)).first()
        if row is None or row.revoked:
            return None
        return _record(row)

    async def record_use(self, key_id: str) -> None:
        async with (
            wrap_database_errors("recording API key use"),
            self._engine.begin() as connection,
        ):
            await connection.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id)
                .values(usage_count=api_keys.c.usage_count + 1, last_used_at=self._clock())
            )
