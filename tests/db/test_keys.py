"""One contract suite for every key store: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from claybot.db.database import HEAD_REVISION, MIGRATIONS, current_revision, migrate
from claybot.db.keys import ApiKeyStore, MemoryApiKeyStore
from claybot.db.sql_keys import SqlApiKeyStore
from claybot.db.tables import api_keys
from tests.db.conftest import open_database, url_for


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[ApiKeyStore]:
    if request.param == "memory":
        yield MemoryApiKeyStore()
        return
    async for engine in open_database(url_for(request.param, request, tmp_path)):
        yield SqlApiKeyStore(engine)  # type: ignore[arg-type]


async def test_a_created_key_verifies_and_is_shown_only_as_a_prefix(store: ApiKeyStore) -> None:
    record, plaintext = await store.create("ci", ["jobs:read", "jobs:write"], rate_limit_rpm=30)
    assert plaintext.startswith("cb_") and len(plaintext) > 40
    assert record.prefix == plaintext[:12] and record.scopes == ("jobs:read", "jobs:write")
    verified = await store.verify(plaintext)
    assert verified is not None and verified.id == record.id and verified.rate_limit_rpm == 30
    assert await store.verify(plaintext + "x") is None
    assert await store.verify("not-a-key") is None
    listed = await store.list()
    assert [r.id for r in listed] == [record.id]
    assert plaintext not in repr(listed)


async def test_revoking_by_id_or_prefix(store: ApiKeyStore) -> None:
    first, first_key = await store.create("a", ["admin"])
    second, second_key = await store.create("b", ["agents:read"])
    revoked = await store.revoke(first.prefix)
    assert revoked is not None and revoked.revoked and revoked.revoked_at is not None
    assert await store.verify(first_key) is None
    assert await store.verify(second_key) is not None
    assert (await store.revoke(second.id)) is not None
    assert await store.revoke("cb_nothing") is None


async def test_use_is_counted(store: ApiKeyStore) -> None:
    record, _ = await store.create("a", ["admin"])
    await store.record_use(record.id)
    await store.record_use(record.id)
    updated = await store.get(record.id)
    assert updated is not None and updated.usage_count == 2
    assert updated.last_used_at is not None and updated.last_used_at.tzinfo is not None
    assert updated.last_used_at <= datetime.now(UTC)


async def test_unknown_scopes_are_refused(store: ApiKeyStore) -> None:
    with pytest.raises(ValueError, match="unknown scope 'jobs:everything'"):
        await store.create("a", ["jobs:everything"])
    with pytest.raises(ValueError, match="at least one scope"):
        await store.create("a", [])
    assert await store.list() == []


async def test_only_the_hash_is_stored(database: Any) -> None:
    store = SqlApiKeyStore(database)
    _, plaintext = await store.create("a", ["admin"])
    async with database.connect() as connection:
        row = (await connection.execute(select(api_keys))).one()
    assert row.key_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert plaintext not in str(tuple(row))


async def test_migrate_is_idempotent_and_head_is_known(database: Any) -> None:
    await migrate(database)
    await migrate(database)
    assert await current_revision(database) == HEAD_REVISION
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION
