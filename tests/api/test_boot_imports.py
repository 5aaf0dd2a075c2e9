"""What `claybot start` imports before its socket answers: the database's libraries
(SQLAlchemy, alembic: a third of a second) load in the background once it does, and
the MCP SDK at its first use."""

from __future__ import annotations

import subprocess
import sys

DEFERRED = ("sqlalchemy", "alembic", "aiosqlite", "asyncpg", "mcp")


def test_the_api_and_the_cli_load_no_database_library() -> None:
    probe = (
        "import sys, claybot.cli.main, claybot.api.serve, claybot.api.app\n"
        f"print(sorted(m for m in {DEFERRED!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert loaded == "[]"
