"""The API key store on SQLite or PostgreSQL (SQLAlchemy Core).

``may_be_live`` answers from a copy of the keys' digests in memory, so an unknown key
refused that way costs no query. Measured: one lookup costs 0.6 ms of CPU on SQLite and
1.2 ms on PostgreSQL (SQLAlchemy, the driver, the pool); a TCP request answered 401
after one cost the engine 1.2-1.4 ms, one refused without it 0.16 ms. Reading every
digest costs 2-3 ms for 1,000 keys, about 12 ms for 10,000. The copy holds every key
made or verified through this store, so on one engine it is exact; keys that other
engines sharing the database made are seen when it is read again, which a miss does
once the copy is ``DIGESTS_FRESH_S`` old.
"""

from __future__ import annotations

import asyncio
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

DIGESTS_FRESH_S = 1.0  # how old the copy of the digests may be when it says "no such key"


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
        owner_email=row.owner_email,
    )


class SqlApiKeyStore:
    def __init__(self, engine: AsyncEngine, clock: Clock = utcnow) -> None:
        self._engine = engine
        self._clock = clock
        # Only ever grows (a revoked key's digest stays): a miss must mean "no such key",
        # and a read that started before a key was made must not drop it.
        self._digests: set[str] = set()
        self._digests_read_at: datetime | None = None
        self._reading_digests = asyncio.Lock()  # one read at a time, however many misses

    async def create(
        self,
        name: str,
        scopes: Iterable[str],
        rate_limit_rpm: int = 60,
        owner_email: str | None = None,
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
            owner_email=owner_email,
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
                    owner_email=owner_email,
                )
            )
        self._digests.add(hash_key(plaintext))
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
            digest = hash_key(plaintext)
            query = select(api_keys).where(api_keys.c.key_hash == digest)
            row = (await connection.execute(query)).first()
        if row is None or row.revoked:
            return None
        self._digests.add(digest)  # made by another engine, perhaps
        return _record(row)

    async def may_be_live(self, plaintext: str) -> bool:
        if not plaintext.startswith(KEY_PREFIX):
            return False
        digest = hash_key(plaintext)
        if digest in self._digests:
            return True
        async with self._reading_digests:
            if not self._digests_fresh():
                await self._read_digests()
        return digest in self._digests

    def _digests_fresh(self) -> bool:
        if self._digests_read_at is None:
            return False
        age_s = (self._clock() - self._digests_read_at).total_seconds()
        return 0 <= age_s < DIGESTS_FRESH_S  # a clock set back counts as stale

    async def _read_digests(self) -> None:
        self._digests_read_at = self._clock()  # a failed read is not retried at once either
        async with (
            wrap_database_errors("reading the API keys' digests"),
            self._engine.connect() as connection,
        ):
            live = select(api_keys.c.key_hash).where(api_keys.c.revoked.is_(False))
            self._digests.update((await connection.scalars(live)).all())

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
