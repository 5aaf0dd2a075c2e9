"""Checking a presented API key, for every door that takes one: the TCP API and the
dashboard's login form.

Only failures are limited, per client address (``FailureLimiter``): a valid key is let
in whatever other keys failed from its address, since behind a reverse proxy, or on
localhost, every client shares one. Past its limit a client's failures are answered
429, and those cost no lookup where the store can tell from memory that a key is no
live key (``ApiKeyStore.may_be_live``): a request refused after a lookup costs the
engine about eight times one refused without it (``claybot.db.sql_keys``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import Scope

from claybot.api.ratelimit import FailureLimiter

if TYPE_CHECKING:
    from claybot.db.keys import ApiKeyRecord, ApiKeyStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyCheck:
    record: ApiKeyRecord | None  # the live key presented, or None
    retry_after_s: int = 0  # a failure past the client's limit: when the next one is not


async def check_key(
    store: ApiKeyStore, failures: FailureLimiter, client: str, presented: str
) -> KeyCheck:
    """The live key ``presented`` is, or a failure counted against ``client``.

    Raises StoreError when the store cannot answer (nothing is counted then).
    """
    limited = failures.retry_after(client) > 0
    if not limited or await store.may_be_live(presented):
        record = await store.verify(presented)
        if record is not None:
            return KeyCheck(record)
    wait_s = failures.record_failure(client)
    if not limited and failures.retry_after(client):
        log.warning(
            "%d unknown API keys in a minute from %s: its failures get 429 until the oldest "
            "is a minute old (its valid keys still get in); if this is yours, check the key "
            "it sends",
            failures.limit,
            client,
            extra={"action": "keys.client_limited", "client": client},
        )
    return KeyCheck(None, wait_s)


def client_address(scope: Scope) -> str:
    """The peer's address (not its port, which changes with every connection).

    Forwarding headers are not trusted: anyone can send them. Behind a reverse
    proxy every client is the proxy's address and shares one failure count.
    """
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
