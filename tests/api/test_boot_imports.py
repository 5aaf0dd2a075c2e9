"""What `claybot start` imports before its socket answers: the database's libraries
(SQLAlchemy, alembic: a third of a second) load in the background once it does, the
MCP SDK at its first use, httpx at the first fetch (it brings its own command line,
rich and pygments: 80 ms) and prometheus_client at the first scrape."""

from __future__ import annotations

import subprocess
import sys

DEFERRED = ("sqlalchemy", "alembic", "aiosqlite", "asyncpg", "mcp", "httpx", "prometheus_client")


def test_the_engine_loads_no_library_it_needs_only_later() -> None:
    probe = (
        "import sys, claybot.api.serve, claybot.api.app\n"
        f"print(sorted(m for m in {DEFERRED!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert loaded == "[]"
