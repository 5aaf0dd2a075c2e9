"""Free memory goes back to the operating system (the engine's RSS: bench/agents.py --memory)."""

from __future__ import annotations

import gc
import json
import logging
import platform
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

from claybot.kernel import memory


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def collector_off() -> Iterator[None]:
    """No automatic collection between making garbage and releasing it."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("collector_off")
def test_what_only_a_reference_cycle_holds_is_freed(caplog: pytest.LogCaptureFixture) -> None:
    first, second = Node(), Node()
    first.other, second.other = second, first
    alive = weakref.ref(first)
    del first, second
    assert alive() is not None  # reference counting alone does not free a cycle

    with caplog.at_level(logging.DEBUG, logger=memory.__name__):
        released = memory.release_freed_memory()

    assert alive() is None
    assert released.collected >= 2  # the two nodes (and their __dict__s)
    (record,) = [r for r in caplog.records if getattr(r, "action", "") == "memory.trimmed"]
    assert record.__dict__["collected"] == released.collected
    assert record.__dict__["trimmed"] == released.trimmed


# In a fresh interpreter, whose heap holds nothing else of note: 64 MB in blocks of 64 KB
# (under glibc's mmap threshold, so from its heap), each followed by a block that stays,
# so that freeing them leaves holes free() cannot give back by itself (it only shrinks the
# heap's top). Only malloc_trim returns the pages inside the holes.
TRIM = """
import json
from claybot.kernel import memory

def rss_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

large = []
kept = []
for _ in range(1024):
    large.append(bytearray(64 * 1024))  # zero-filled: every page is touched
    kept.append(bytearray(1024))  # over pymalloc's 512 bytes: from glibc's heap too
loaded = rss_mb()
del large
freed = rss_mb()
released = memory.release_freed_memory()
print(json.dumps({"loaded": loaded, "freed": freed, "released": rss_mb(),
                  "trimmed": released.trimmed, "kept": len(kept)}))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_the_c_heap_s_free_pages_go_back_to_the_system() -> None:
    result = subprocess.run(
        [sys.executable, "-c", TRIM], capture_output=True, text=True, timeout=60, check=True
    )
    measured = json.loads(result.stdout)
    # free() alone kept the holes resident...
    assert measured["loaded"] - measured["freed"] < 16
    # ...and the release gave at least 48 of their 64 MB back.
    assert measured["freed"] - measured["released"] > 48
    assert measured["trimmed"] is True
