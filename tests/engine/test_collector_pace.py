"""An engine sets the garbage collector's pace for the load it carries."""

from __future__ import annotations

import gc

from claybot.engine.engine import Engine
from claybot.kernel.collector import MIDDLE_THRESHOLD, OLD_THRESHOLD, YOUNG_THRESHOLD


async def test_an_engine_paces_the_garbage_collector_for_its_load(engine: Engine) -> None:
    """At CPython's default pace the collector walked every message's objects three
    times over and took a third of the engine's CPU (kernel/collector.py)."""
    assert gc.get_threshold() == (YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
