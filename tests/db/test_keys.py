"""One contract suite for every key store: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from claybot.db.errors import StoreError
from claybot.db.keys import SCOPES, ApiKeyStore, MemoryApiKeyStore
from claybot.db.sql_keys import DIGESTS_FRESH_S, SqlApiKeyStore
from claybot.db.tables import api_keys
from tests.databases import open_database, url_for


class Clock:
    """A UTC clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[ApiKeyStore]:
    if request.param == "memory":
        yield MemoryApiKeyStore(clock)
        return
    async for engine in open_database(url_for(request.param, request, tmp_path)):
        yield SqlApiKeyStore(engine, clock)


async def test_a_key_keeps_whom_it_is_for(store: ApiKeyStore) -> None:
    made, plaintext = await store.create("ops", ["admin"], owner_email="ops@example.com")
    unnamed, _ = await store.create("ci", ["jobs:read"])
    assert (made.owner_email, unnamed.owner_email) == ("ops@example.com", None)
    listed = {record.id: record.owner_email for record in await store.list()}
    assert listed == {made.id: "ops@example.com", unnamed.id: None}
    verified = await store.verify(plaintext)
    assert verified is not None and verified.owner_email == "ops@example.com"
    revoked = await store.revoke(made.id)
    assert revoked is not None and revoked.owner_email == "ops@example.com"


async def test_a_created_key_verifies_and_is_shown_only_as_a_prefix(
    store: ApiKeyStore, clock: Clock
) -> None:
    record, plaintext = await store.create("ci", ["jobs:read", "jobs:write"], rate_limit_rpm=30)
    assert plaintext.startswith("cb_") and len(plaintext) > 40
    assert record.prefix == plaintext[:12] and record.scopes == ("jobs:read", "jobs:write")
    assert (record.name, record.rate_limit_rpm, record.created_at) == ("ci", 30, clock.now)
    assert (record.usage_count, record.last_used_at, record.revoked, record.revoked_at) == (
        0,
        None,
        False,
        None,
    )
    verified = await store.verify(plaintext)
    assert verified == record  # what was stored is what comes back, times in UTC
    assert verified is not None and verified.created_at.utcoffset() == timedelta(0)
    assert await store.verify(plaintext + "x") is None
    assert await store.verify(plaintext[:-1]) is None
    assert await store.verify("not-a-key") is None
    assert await store.verify("") is None
    assert await store.list() == [record]
    assert await store.get(record.id) == record
    assert plaintext not in repr(await store.list())


async def test_each_key_is_new(store: ApiKeyStore) -> None:
    keys = {(await store.create(f"k{n}", ["admin"]))[1] for n in range(5)}
    assert len(keys) == 5
    assert len({key[:12] for key in keys}) == 5


async def test_the_default_rate_and_repeated_scopes(store: ApiKeyStore) -> None:
    record, _ = await store.create("a", ["jobs:read", "jobs:read", "admin"])
    assert record.rate_limit_rpm == 60 and record.scopes == ("jobs:read", "admin")
    stored = await store.get(record.id)
    assert stored is not None and stored.scopes == ("jobs:read", "admin")


async def test_listing_is_oldest_first(store: ApiKeyStore, clock: Clock) -> None:
    first, _ = await store.create("first", ["admin"])
    clock.advance(1)
    second, _ = await store.create("second", ["admin"])
    assert [r.name for r in await store.list()] == ["first", "second"]
    assert second.created_at - first.created_at == timedelta(seconds=1)


async def test_revoking_by_id_or_prefix(store: ApiKeyStore, clock: Clock) -> None:
    first, first_key = await store.create("a", ["admin"])
    second, second_key = await store.create("b", ["agents:read"])
    clock.advance(5)
    revoked = await store.revoke(first.prefix)
    assert revoked is not None and revoked.revoked and revoked.revoked_at == clock.now
    assert await store.verify(first_key) is None
    assert await store.verify(second_key) is not None
    listed = {r.id: r for r in await store.list()}
    assert listed[first.id].revoked and not listed[second.id].revoked  # revoked keys stay listed
    by_id = await store.revoke(second.id)
    assert by_id is not None and by_id.revoked
    assert await store.verify(second_key) is None
    assert await store.revoke("cb_nothing") is None
    assert await store.revoke("") is None


async def test_revoking_twice_keeps_the_first_time(store: ApiKeyStore, clock: Clock) -> None:
    record, _ = await store.create("a", ["admin"])
    first = await store.revoke(record.id)
    clock.advance(60)
    again = await store.revoke(record.id)
    assert first is not None and again is not None
    assert again.revoked and again.revoked_at == first.revoked_at


async def test_use_is_counted(store: ApiKeyStore, clock: Clock) -> None:
    record, _ = await store.create("a", ["admin"])
    other, _ = await store.create("b", ["admin"])
    await store.record_use(record.id)
    clock.advance(2)
    await store.record_use(record.id)
    updated = await store.get(record.id)
    assert updated is not None and updated.usage_count == 2
    assert updated.last_used_at == clock.now and updated.last_used_at.tzinfo is not None
    untouched = await store.get(other.id)
    assert untouched is not None and untouched.usage_count == 0
    await store.record_use("no-such-key")  # a key revoked and gone meanwhile: nothing to do
    assert await store.get("no-such-key") is None


async def test_unknown_scopes_are_refused(store: ApiKeyStore) -> None:
    with pytest.raises(ValueError, match="unknown scope 'jobs:everything'"):
        await store.create("a", ["jobs:read", "jobs:everything"])
    with pytest.raises(ValueError, match="at least one scope"):
        await store.create("a", [])
    assert await store.list() == []


async def test_every_scope_can_be_granted(store: ApiKeyStore) -> None:
    record, plaintext = await store.create("all", sorted(SCOPES))
    verified = await store.verify(plaintext)
    assert verified is not None and set(verified.scopes) == SCOPES == set(record.scopes)


async def test_every_key_made_may_be_live_and_no_unknown_one_is(store: ApiKeyStore) -> None:
    record, plaintext = await store.create("a", ["admin"])
    assert await store.may_be_live(plaintext) is True
    for unknown in (plaintext[:-1], plaintext + "x", "cb_" + "A" * 43, "sk-elsewhere", ""):
        assert await store.may_be_live(unknown) is False
    await store.revoke(record.id)
    assert await store.may_be_live(plaintext) is True  # "may": verify has the last word
    assert await store.verify(plaintext) is None


class Queries:
    """Counts the statements a database is sent."""

    def __init__(self, database: Any) -> None:
        self.count = 0
        event.listen(database.sync_engine, "before_cursor_execute", self._counted)

    def _counted(self, *_: Any) -> None:
        self.count += 1


async def test_may_be_live_answers_from_memory_and_learns_other_engines_keys(
    database: Any, clock: Clock
) -> None:
    """Two engines on one database: each knows its own keys at once, and the other's
    when it reads the digests again, which a miss does once they are a second old."""
    here, elsewhere = SqlApiKeyStore(database, clock), SqlApiKeyStore(database, clock)
    _, old = await elsewhere.create("made before", ["admin"])
    queries = Queries(database)
    assert await here.may_be_live(old) is True  # the first question reads the digests
    assert queries.count == 1
    _, mine = await here.create("mine", ["admin"])
    queries.count = 0
    for n in range(100):
        assert await here.may_be_live(f"cb_guess{n}") is False
    assert await here.may_be_live(mine) is True
    assert queries.count == 0  # a hundred unknown keys, and the database was not asked

    _, theirs = await elsewhere.create("made since", ["admin"])
    assert await here.may_be_live(theirs) is False  # not read again yet
    clock.advance(DIGESTS_FRESH_S)
    assert await here.may_be_live(theirs) is True
    _, verified = await elsewhere.create("verified", ["admin"])
    assert await here.verify(verified) is not None  # a key seen is known from then on
    queries.count = 0
    assert await here.may_be_live(verified) is True
    assert queries.count == 0


async def test_admin_passes_every_scope_check() -> None:
    store = MemoryApiKeyStore()
    admin, _ = await store.create("a", ["admin"])
    reader, _ = await store.create("r", ["jobs:read"])
    assert all(admin.allows(scope) for scope in SCOPES) and admin.allows(None)
    assert reader.allows("jobs:read") and reader.allows(None)
    assert not reader.allows("jobs:write") and not reader.allows("admin")


async def test_only_the_hash_is_stored(database: Any) -> None:
    store = SqlApiKeyStore(database)
    _, plaintext = await store.create("a", ["admin"])
    async with database.connect() as connection:
        row = (await connection.execute(select(api_keys))).one()
    assert row.key_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert plaintext not in str(tuple(row))
    assert plaintext[12:] not in str(tuple(row))  # beyond the display prefix, nothing of it


async def test_database_failures_are_store_errors(tmp_path: Path) -> None:
    from claybot.db.database import create_database_engine

    engine = create_database_engine(f"sqlite+aiosqlite:///{tmp_path}/never-migrated.db")
    try:
        store = SqlApiKeyStore(engine)
        with pytest.raises(StoreError, match="listing API keys failed"):
            await store.list()
        with pytest.raises(StoreError, match="checking an API key failed"):
            await store.verify("cb_whatever")
    finally:
        await engine.dispose()


async def test_an_unreachable_server_is_a_store_error() -> None:
    from claybot.db.database import create_database_engine

    # Port 1 on loopback: nothing listens, the connection is refused at once.
    engine = create_database_engine("postgresql+asyncpg://nobody:secret@127.0.0.1:1/none")
    try:
        with pytest.raises(StoreError) as caught:
            await SqlApiKeyStore(engine).list()
        assert "secret" not in str(caught.value)
    finally:
        await engine.dispose()
