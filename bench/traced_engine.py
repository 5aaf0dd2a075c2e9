"""``claybot`` under tracemalloc, for ``bench/agents.py --memory --tracemalloc``.

    python bench/traced_engine.py <snapshot folder> start --port 0

The first SIGUSR1 starts tracing (25 frames each allocation): traced from its start,
the boot took minutes of CPU on a busy machine, and what a load leaves behind is made
after boot anyway. Each later SIGUSR1 runs a full collection and writes a snapshot,
``1.tracemalloc``, ``2.tracemalloc``, … in the folder (written under another name,
then renamed: a file that exists is whole). A file ``tracing`` says tracing began.
Tracing costs CPU and memory of its own: the engine is slower and its RSS larger.
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
    taken = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal taken
        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
            (folder / "tracing").touch()
            return
        taken += 1
        gc.collect()
        path = folder / f"{taken}.tracemalloc"
        tracemalloc.take_snapshot().dump(str(path.with_suffix(".part")))
        path.with_suffix(".part").rename(path)

    signal.signal(signal.SIGUSR1, on_signal)
    sys.argv = ["claybot", *sys.argv[2:]]
    runpy.run_module("claybot", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
