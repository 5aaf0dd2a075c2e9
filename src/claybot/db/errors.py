"""Driver errors become ours at the edge: nothing above a store catches sqlite3 or asyncpg."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from claybot.kernel.errors import Unavailable


class StoreError(Unavailable):
    """The database could not do what was asked (unreachable, locked, broken schema)."""

    code = "database_unavailable"
    retry_after_s = 5


@asynccontextmanager
async def wrap_database_errors(action: str) -> AsyncIterator[None]:
    from sqlalchemy.exc import SQLAlchemyError  # only stores call this: SQLAlchemy is loaded

    try:
        yield
    except SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        raise StoreError(f"{action} failed: {type(cause).__name__}: {cause}") from exc
    except OSError as exc:  # e.g. PostgreSQL unreachable
        raise StoreError(f"{action} failed: {exc}") from exc
