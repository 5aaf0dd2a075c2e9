"""The event loop the engine and ``claybot worker`` run on."""

from __future__ import annotations

import asyncio


def event_loop_runner() -> asyncio.Runner:
    """uvloop when it is installed, asyncio's loop otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)
