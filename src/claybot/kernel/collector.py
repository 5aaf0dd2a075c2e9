"""The cyclic garbage collector's pace, for a process that runs agents or jobs.

CPython collects its youngest generation every 700 net container allocations, the
middle one every tenth time, and everything now and then. A collection walks every
young object still alive, and an engine under load has tens of thousands of them
in flight (a coroutine, a future and a handful of records per message on its way):
a young collection walked some 40,000 objects, and most of them were walked again
in the middle generation and once more in the oldest before they died. Measured
in-process with 1,000 agents under load (``bench/agents.py``'s in-process rows), the
collector took 35-45 % of the engine's CPU, about 100 us a message.

Collecting the young generation every 50,000 net allocations instead lets almost
every message's objects die first (they are freed by reference counting, and the
count is net of those): a few collections a second at full load, each as long as
one walk of what is in flight (15-50 ms, about what a single collection of the
oldest generation took before). Garbage in reference cycles lives a little longer;
the idle unload still runs a full collection (``kernel/memory.py``).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000  # net container allocations between young collections
MIDDLE_THRESHOLD = 20  # young collections between middle ones
OLD_THRESHOLD = 100  # middle collections before a full one is considered


def pace_collector() -> None:
    """Set the collector's thresholds for an engine or worker process (idempotent)."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
