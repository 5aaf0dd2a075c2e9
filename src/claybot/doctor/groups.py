"""The names of the groups of checks, in the order they run and are shown (``--only``
takes them). Apart, so the command line lists them without importing the checks."""

from __future__ import annotations

GROUPS = (
    "home",
    "config",
    "provider",
    "local",
    "sandbox",
    "port",
    "database",
    "claude",
    "telegram",
    "disk",
)
