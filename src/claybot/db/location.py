"""Which database the engine uses (no driver imported here: boot stays light)."""

from __future__ import annotations

from collections.abc import Mapping

from claybot.config.home import HomePaths

DATABASE_URL_ENV = "CLAYBOT_DATABASE_URL"


def database_url(paths: HomePaths, env: Mapping[str, str]) -> str:
    """``CLAYBOT_DATABASE_URL`` (PostgreSQL gets the asyncpg driver), else SQLite in the home."""
    url = env.get(DATABASE_URL_ENV, "").strip()
    if not url:
        return f"sqlite+aiosqlite:///{paths.database}"
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


def redact_url(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"
