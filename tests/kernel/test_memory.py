"""Free memory goes back to the operating system (the engine's RSS: bench/agents.py --memory).

Each case runs in a fresh interpreter: what CPython's allocator holds depends on
everything the process allocated before, and a test process has allocated a lot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# A load of a million small strings, of which one in 5,000 outlives it: every arena the
# load took keeps a few, so none is given back whole.
LOAD = """
import gc, json, sys
from claybot.kernel import memory

def rss_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

tracking = memory.track_arenas()
at_start = rss_mb()
load = [str(n) * 3 for n in range(1_000_000)]
survivors = load[::5000]
del load
gc.collect()
after_load = rss_mb()
memory.release_freed_memory()
released = rss_mb()
# The released pools are used again: the same load fits, and what survived is intact.
again = [str(n) * 3 for n in range(1_000_000)]
intact = survivors == [str(n) * 3 for n in range(0, 1_000_000, 5000)] and again[-1] == "999999" * 3
print(json.dumps({"tracking": tracking, "start": at_start, "after_load": after_load,
                  "released": released, "intact": intact}))
"""


def run_load(**environ: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", LOAD],
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    measured: dict[str, float] = json.loads(result.stdout)
    return measured


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="built and measured on Linux")
def test_the_free_pools_a_load_left_in_its_arenas_go_back_to_the_system() -> None:
    measured = run_load()
    assert measured["tracking"] is True
    kept_by_the_load = measured["after_load"] - measured["start"]
    assert kept_by_the_load > 40  # MB: the survivors pin every arena the load took
    # All but each free pool's first page (4 of 16 KiB) goes back.
    assert measured["released"] - measured["start"] < kept_by_the_load * 0.4
    assert measured["intact"] is True


def test_under_another_allocator_nothing_is_tracked_and_nothing_breaks() -> None:
    measured = run_load(PYTHONMALLOC="malloc")
    assert measured["tracking"] is False
    assert measured["intact"] is True


# Threads parked a few hundred frames deep while the pools are released: the arena
# allocator also hands out each thread's stack of frames, and releasing one of those
# as if it were a free pool crashed the thread (one crash in a full suite run).
THREADS = """
import threading
from claybot.kernel import memory

def deep(depth, parked, go):
    if depth == 0:
        parked.release()
        go.wait()
        return 0
    return deep(depth - 1, parked, go) + depth

assert memory.track_arenas()
results = []
for _ in range(5):
    parked, go = threading.Semaphore(0), threading.Event()
    threads = [threading.Thread(target=lambda: results.append(deep(200, parked, go)))
               for _ in range(32)]
    for thread in threads:
        thread.start()
    for _ in threads:
        parked.acquire()
    memory.release_freed_memory()
    go.set()
    for thread in threads:
        thread.join()
print(len(results), set(results))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="built and measured on Linux")
def test_the_frames_of_running_threads_are_left_alone() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", THREADS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["160", str({sum(range(1, 201))})]
