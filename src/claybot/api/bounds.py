"""The bounds of the integers a request carries to a list, a database row or a record.

Every integer a request sends has both bounds in the OpenAPI document, so a client
knows them and a value past them is refused naming its field (422; 400 on seed
002's ``/api/v1``) instead of reaching the database: SQLite and PostgreSQL hold
signed 64-bit integers, and ``offset=2**64`` was an ``OverflowError``, a 500.
Schemathesis's coverage phase sends each stated maximum and one past it; it sends
no large value where the document states no maximum, which is how that 500 went
unseen (tests/api/test_openapi_conformance.py now fails on any integer without both).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

# A row id or a record number: what a BIGINT column (and SQLite's INTEGER) holds.
INT64_MAX = 2**63 - 1
# Rows a page skips: far past any list (a billion jobs), and small enough that no
# arithmetic on it nears a column's limit.
MAX_OFFSET = 2**31 - 1

Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Rows to skip")]
