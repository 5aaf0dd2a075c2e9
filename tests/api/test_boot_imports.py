"""What `claybot start` imports before its socket answers: the database's libraries
(SQLAlchemy, alembic: a third of a second) load in the background once it does, the
MCP SDK at its first use, httpx at the first fetch (it brings its own command line,
rich and pygments: 80 ms), prometheus_client at the first scrape, and the dashboard's
pages (Jinja2 and markdown-it with them) when the first page is asked for."""

from __future__ import annotations

import subprocess
import sys

DEFERRED = (
    "sqlalchemy",
    "alembic",
    "aiosqlite",
    "asyncpg",
    "mcp",
    "httpx",
    "prometheus_client",
    "jinja2",
    "markdown_it",
    "claybot.web.site",
    "claybot.web.chat_pages",
)


def test_the_engine_loads_no_library_it_needs_only_later() -> None:
    probe = (
        "import sys, claybot.cli.main, claybot.server.serve, claybot.server.app\n"
        f"print(sorted(m for m in {DEFERRED!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert loaded == "[]"


def test_boot_turns_the_garbage_collector_back_on_with_boots_objects_frozen() -> None:
    probe = (
        "import gc\n"
        "from claybot.server.serve import freeze_boot_heap\n"
        "gc.disable()  # as `claybot start` does for boot\n"
        "kept = [[n] for n in range(1000)]\n"
        "freeze_boot_heap()\n"
        "print(gc.isenabled(), gc.get_freeze_count() >= 1000)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert shown == "True True"
