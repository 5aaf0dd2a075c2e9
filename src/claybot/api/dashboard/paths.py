"""Which paths are the dashboard's: they answer to its session cookie, not to an API key."""

from __future__ import annotations

PAGES = frozenset({"/", "/login", "/logout"})
STATIC_ROOT = "/static"


def is_dashboard_path(path: str) -> bool:
    return path in PAGES or path.startswith(STATIC_ROOT + "/")
