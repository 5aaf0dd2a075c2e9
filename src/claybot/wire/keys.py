"""API keys for the TCP listener: their records, never the keys (but once, when made)."""

from __future__ import annotations

from pydantic import Field

from claybot.db.keys import ApiKeyRecord
from claybot.wire.base import Answer, Ok


class ApiKey(Answer):
    id: str
    prefix: str = Field(description="The key's first characters, to tell keys apart")
    name: str
    scopes: list[str]
    rateLimitRpm: int
    createdAt: str = Field(description="ISO 8601")
    lastUsedAt: str | None = Field(description="ISO 8601")
    usageCount: int
    revoked: bool

    @classmethod
    def of(cls, record: ApiKeyRecord) -> ApiKey:
        return cls(
            id=record.id,
            prefix=record.prefix,
            name=record.name,
            scopes=list(record.scopes),
            rateLimitRpm=record.rate_limit_rpm,
            createdAt=record.created_at.isoformat(),
            lastUsedAt=None if record.last_used_at is None else record.last_used_at.isoformat(),
            usageCount=record.usage_count,
            revoked=record.revoked,
        )


class ApiKeyList(Ok):
    keys: list[ApiKey]


class ApiKeyCreated(Ok):
    key: str = Field(description="The key itself: shown this once, stored only as a hash")
    record: ApiKey


class ApiKeyRevoked(Ok):
    record: ApiKey
