"""Which paths are the dashboard's: they answer to its session cookie, not to an API key.
Known without importing the pages, which load the first time one is asked for."""

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
CHAT_PAGES = "/chat/"
# The chat form's limits, which the body limit applies before any page is loaded:
# a message's text, and the form's body past its files' cap (the text at up to 4
# bytes a character, and the framing).
MESSAGE_MAX = 100_000
CHAT_FORM_SLACK_BYTES = 4 * MESSAGE_MAX + 64 * 1024


def is_dashboard_path(path: str) -> bool:
    return (
        path in PAGES
        or path.startswith(STATIC_ROOT + "/")
        or any(path == root or path.startswith(root + "/") for root in SECTIONS)
    )
