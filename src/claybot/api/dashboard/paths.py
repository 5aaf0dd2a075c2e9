"""Which paths are the dashboard's: they answer to its session cookie, not to an API key."""

from __future__ import annotations

PAGES = frozenset({"/", "/login", "/logout", "/activity"})
# Pages with pages below them (``/agents/{id}``).
SECTIONS = (
    "/chat",
    "/files",
    "/agents",
    "/permissions",
    "/automations",
    "/proactive",
    "/jobs",
    "/settings",
)
STATIC_ROOT = "/static"


def is_dashboard_path(path: str) -> bool:
    return (
        path in PAGES
        or path.startswith(STATIC_ROOT + "/")
        or any(path == root or path.startswith(root + "/") for root in SECTIONS)
    )
