"""``claybot`` under tracemalloc, for ``bench/agents.py --memory --tracemalloc``.

    python bench/traced_engine.py <snapshot folder> start --port 0

Traces every allocation from before ClayBot is imported (25 frames each). Each
SIGUSR1 runs a full collection and writes a snapshot, ``1.tracemalloc``,
``2.tracemalloc``, … in the folder (written under another name, then renamed: a file
that exists is whole). Tracing costs CPU and memory of its own: the engine is slower
and its RSS larger than without it.
"""

from __future__ import annotations

import gc
import runpy
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

FRAMES = 25


def main() -> None:
    folder = Path(sys.argv[1])
    tracemalloc.start(FRAMES)
    taken = 0

    def snapshot(signum: int, frame: FrameType | None) -> None:
        nonlocal taken
        taken += 1
        gc.collect()
        path = folder / f"{taken}.tracemalloc"
        tracemalloc.take_snapshot().dump(str(path.with_suffix(".part")))
        path.with_suffix(".part").rename(path)

    signal.signal(signal.SIGUSR1, snapshot)
    sys.argv = ["claybot", *sys.argv[2:]]
    runpy.run_module("claybot", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
