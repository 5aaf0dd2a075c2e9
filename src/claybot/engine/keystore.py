"""The engine's API key store, available once the database is open.

The database holds what processes share (API keys now, jobs later); agents do
not need it. So the engine opens it in the background after its socket is up:
boot does not wait for SQLAlchemy to import or for PostgreSQL to answer, and key
operations simply wait until the store is ready (or fail with StoreError if the
database cannot be opened).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from claybot.db.errors import StoreError
from claybot.db.location import redact_url

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from claybot.db.keys import ApiKeyRecord, ApiKeyStore

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 30.0


class DeferredApiKeyStore:
    def __init__(self) -> None:
        self._ready: asyncio.Future[ApiKeyStore] = asyncio.get_running_loop().create_future()
        self.error: str | None = None

    @property
    def ready(self) -> bool:
        return self._ready.done() and self.error is None

    def resolve(self, store: ApiKeyStore) -> None:
        self._ready.set_result(store)

    def fail(self, error: str) -> None:
        self.error = error
        self._ready.set_exception(StoreError(error))
        self._ready.exception()  # retrieved: callers re-raise it themselves

    async def _store(self) -> ApiKeyStore:
        return await asyncio.shield(self._ready)

    async def create(
        self,
        name: str,
        scopes: Iterable[str],
        rate_limit_rpm: int = 60,
        owner_email: str | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        return await (await self._store()).create(name, scopes, rate_limit_rpm, owner_email)

    async def list(self) -> list[ApiKeyRecord]:
        return await (await self._store()).list()

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        return await (await self._store()).get(key_id)

    async def revoke(self, id_or_prefix: str) -> ApiKeyRecord | None:
        return await (await self._store()).revoke(id_or_prefix)

    async def verify(self, plaintext: str) -> ApiKeyRecord | None:
        return await (await self._store()).verify(plaintext)

    async def may_be_live(self, plaintext: str) -> bool:
        return await (await self._store()).may_be_live(plaintext)

    async def record_use(self, key_id: str) -> None:
        await (await self._store()).record_use(key_id)


async def open_database(url: str, keys: DeferredApiKeyStore) -> AsyncEngine | None:
    """Import the SQL layer off the event loop, migrate, and hand the store over.

    Returns the SQLAlchemy engine (to dispose at shutdown), or None on failure.
    """
    try:
        database = await asyncio.to_thread(importlib.import_module, "claybot.db.database")
        sql_keys = await asyncio.to_thread(importlib.import_module, "claybot.db.sql_keys")
        engine = database.create_database_engine(url)
        try:
            async with asyncio.timeout(OPEN_TIMEOUT_S):
                await database.migrate(engine)
        except BaseException:
            await engine.dispose()
            raise
    except asyncio.CancelledError:
        keys.fail("the engine stopped before the database was open")
        raise
    except Exception as exc:  # whatever went wrong, waiters must get an answer
        if isinstance(exc, TimeoutError):
            exc = StoreError(f"no answer within {OPEN_TIMEOUT_S:.0f}s")
        message = f"cannot open the database {redact_url(url)}: {exc}"
        log.error(message, extra={"action": "db.unavailable"})
        keys.fail(message)
        return None
    keys.resolve(sql_keys.SqlApiKeyStore(engine))
    opened: AsyncEngine = engine
    return opened


class BackgroundDatabase:
    """The database the engine opens in the background, and the key store over it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.key_store: DeferredApiKeyStore | None = None
        self.sql_engine: Any = None  # the SQLAlchemy engine, once open
        self._opening: asyncio.Task[AsyncEngine | None] | None = None

    @property
    def keys(self) -> DeferredApiKeyStore:
        if self.key_store is None:
            raise RuntimeError("the engine is not started")
        return self.key_store

    def prepare(self) -> None:
        """Key operations may wait from now on (the engine is starting)."""
        self.key_store = DeferredApiKeyStore()

    def open(self) -> None:
        """Open it in the background; key operations wait for it."""
        if self._opening is None:
            self._opening = asyncio.create_task(open_database(self.url, self.keys))

    async def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine once the database is open (opening it if nobody has);
        StoreError when it cannot be."""
        self.open()
        assert self._opening is not None
        engine = await asyncio.shield(self._opening)
        if engine is None:
            raise StoreError(self.keys.error or "the database could not be opened")
        return engine

    async def close(self) -> None:
        if self._opening is not None:
            self.sql_engine = await self._opening
            if self.sql_engine is not None:
                await self.sql_engine.dispose()
