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
    except (SQLAlchemyError, OSError) as exc:  # OSError: e.g. PostgreSQL unreachable
        raise as_store_error(action, exc) from exc


def as_store_error(action: str, exc: Exception) -> Exception:
    """``exc`` as a store raises it: driver errors become ``StoreError`` (the driver's
    error kept as its cause), the store's own errors stay what they are."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, SQLAlchemyError):
        cause = getattr(exc, "orig", None) or exc
        error = StoreError(f"{action} failed: {type(cause).__name__}: {cause}")
    elif isinstance(exc, OSError):
        error = StoreError(f"{action} failed: {exc}")
    else:
        return exc
    error.__cause__ = exc
    return error
