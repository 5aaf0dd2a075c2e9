"""API keys for the TCP API: only the SHA-256 of a key is stored.

``ApiKeyStore`` is the interface; ``SqlApiKeyStore`` (``claybot.db.sql_keys``) runs
on SQLite or PostgreSQL, ``MemoryApiKeyStore`` is its twin for tests. One contract
test suite runs on all. This module imports no database driver.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal, Protocol, get_args

from claybot.kernel.errors import InvalidInput
from claybot.kernel.ids import new_id

# Every scope a key may carry: the one list (the API's documents type theirs with it).
ScopeName = Literal[
    "jobs:read",
    "jobs:write",
    "jobs:delete",
    "agents:read",
    "agents:write",
    "metrics",
    "chat",
    "admin",
]
SCOPES: frozenset[str] = frozenset(get_args(ScopeName))
KEY_PREFIX = "cb_"
DISPLAY_PREFIX_CHARS = 12
MAX_OWNER_EMAIL_CHARS = 320  # the longest an email address may be (RFC 3696 errata)
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ApiKeyRecord:
    id: str
    prefix: str
    name: str
    scopes: tuple[str, ...]
    rate_limit_rpm: int
    created_at: datetime
    last_used_at: datetime | None
    usage_count: int
    revoked: bool
    revoked_at: datetime | None
    owner_email: str | None = None  # whom the key is for (seed 002's keys page shows it)

    def allows(self, scope: str | None) -> bool:
        return scope is None or "admin" in self.scopes or scope in self.scopes


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def new_plaintext_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class InvalidScopes(InvalidInput, ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message, field="scopes")


def validate_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(scopes))
    if not chosen:
        raise InvalidScopes("at least one scope is required")
    for scope in chosen:
        if scope not in SCOPES:
            raise InvalidScopes(f"unknown scope {scope!r} (known: {', '.join(sorted(SCOPES))})")
    return chosen


class ApiKeyStore(Protocol):
    async def create(
        self,
        name: str,
        scopes: Iterable[str],
        rate_limit_rpm: int = 60,
        owner_email: str | None = None,
    ) -> tuple[ApiKeyRecord, str]: ...

    async def list(self) -> list[ApiKeyRecord]: ...

    async def get(self, key_id: str) -> ApiKeyRecord | None: ...

    async def revoke(self, id_or_prefix: str) -> ApiKeyRecord | None: ...

    async def verify(self, plaintext: str) -> ApiKeyRecord | None: ...

    async def may_be_live(self, plaintext: str) -> bool:
        """Whether ``plaintext`` may be a live key, answered from memory where it can be:
        False means ``verify`` would find no live key, so a caller limiting failures may
        refuse it without asking the database. True also for a key revoked since."""
        ...

    async def record_use(self, key_id: str) -> None: ...


class MemoryApiKeyStore:
    """The in-memory twin of SqlApiKeyStore."""

    def __init__(self, clock: Clock = utcnow) -> None:
        self._clock = clock
        self._records: dict[str, ApiKeyRecord] = {}
        self._hashes: dict[str, str] = {}  # hash -> id

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
            new_id(), plaintext[:DISPLAY_PREFIX_CHARS], name, chosen, rate_limit_rpm,
            self._clock(), None, 0, False, None, owner_email,
        )  # fmt: skip
        self._records[record.id] = record
        self._hashes[hash_key(plaintext)] = record.id
        return record, plaintext

    async def list(self) -> list[ApiKeyRecord]:
        return sorted(self._records.values(), key=lambda record: record.created_at)

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        return self._records.get(key_id)

    async def revoke(self, id_or_prefix: str) -> ApiKeyRecord | None:
        matches = [r for r in self._records.values() if id_or_prefix in (r.id, r.prefix)]
        if len(matches) != 1:
            return None
        record = matches[0]
        if not record.revoked:
            record = replace(record, revoked=True, revoked_at=self._clock())
            self._records[record.id] = record
        return record

    async def verify(self, plaintext: str) -> ApiKeyRecord | None:
        key_id = self._hashes.get(hash_key(plaintext))
        record = self._records.get(key_id) if key_id else None
        return None if record is None or record.revoked else record

    async def may_be_live(self, plaintext: str) -> bool:
        return hash_key(plaintext) in self._hashes

    async def record_use(self, key_id: str) -> None:
        record = self._records.get(key_id)
        if record is not None:
            self._records[key_id] = replace(
                record, usage_count=record.usage_count + 1, last_used_at=self._clock()
            )
