"""Parsing ``key=value`` command-line options into settings dictionaries."""

from __future__ import annotations

import json
from typing import Any

from claybot.cli.common import fail


def parse_assignments(pairs: list[str] | None, flag: str) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}`` (values that parse as JSON are typed).

    A dict: the keys are whatever the user typed, for settings whose model is the
    provider's or the plugin's, which checks them (the engine, or ``ProviderSettings``)."""
    values: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            fail(f"{flag} expects key=value, got {pair!r}")
        try:
            values[key.strip()] = json.loads(raw)
        except ValueError:
            values[key.strip()] = raw
    return values
