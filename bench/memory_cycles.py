"""The memory table of bench/agents.py (``--memory``): resident memory does not grow from
one load to the next.

One engine, and the same load-and-unload cycle five times (``--cycles``): 50,000
messages (``--cycle-messages``) to 1,000 agents from 64 senders, the last fifth of them
read by 200 SSE readers (in a process of their own, ``sse_readers.py``); then the
senders and the readers leave, the engine unloads every agent as idle (after 2 s) and
gives the freed memory back (``agents/residency.py``). Each cycle's row is the engine's
RSS after its load (the readers still reading) and after its unload. The goal is a
plateau: each cycle's after-unload RSS within 5 % of the previous cycle's.

With ``--tracemalloc`` the engine runs under tracemalloc from the end of its boot
(``traced_engine.py``) and the table is followed by what the last cycle's unload kept
that the first cycle's did not: snapshots taken after both, compared by line and by
traceback. The RSS of that run is tracemalloc's too (it keeps a trace per live block):
read the table of a run without it.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import signal
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from agents import BENCH, SETTINGS, SocketLoad, SseReaders, drive, until_status

MEMORY_SETTINGS = {**SETTINGS, "agents": {"maxConcurrent": 1024, "idleUnloadS": 2}}
CYCLES = 5
AGENTS = 1000
MESSAGES = 50_000  # per cycle
SSE_READERS = 200
SSE_SHARE = 5  # the last fifth of each cycle's messages is read by the readers
SENDERS = 64
PLATEAU = 0.05  # each after-unload row within this fraction of the previous one
# Start-up, and the release after an unload, go on for a moment after the status says
# they are done: read at once, boot moved by 10 MB from run to run.
AT_REST_S = 1.0
SHOWN = 12  # lines and tracebacks of the tracemalloc comparison


@dataclass(frozen=True)
class Cycle:
    after_load_mb: float
    after_unload_mb: float


async def until_at_rest(load: SocketLoad) -> None:
    """Every agent unloaded, and what the engine does then (a checkpoint, then giving
    freed memory back: agents/residency.py) done; it takes well under a second."""
    await until_status(load, lambda status: status["agents"]["loaded"] == 0)
    await asyncio.sleep(AT_REST_S)


class Snapshots:
    """The tracemalloc snapshots of an engine run by ``traced_engine.py``."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="cb-tracemalloc-", dir="/tmp"))
        self.command = [sys.executable, str(BENCH / "traced_engine.py"), str(self.folder)]
        self.taken: list[Path] = []

    async def start(self, load: SocketLoad) -> None:
        """Tracing starts (after boot: traced from its start, boot took minutes)."""
        await self._signal(load, self.folder / "tracing")

    async def take(self, load: SocketLoad) -> None:
        """A snapshot (a large heap takes seconds)."""
        path = self.folder / f"{len(self.taken) + 1}.tracemalloc"
        await self._signal(load, path)
        self.taken.append(path)

    async def _signal(self, load: SocketLoad, written: Path) -> None:
        load.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 300
        while not await asyncio.to_thread(written.exists):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the engine did not write {written}")
            await asyncio.sleep(0.1)


async def bench_memory(
    cycles_to_run: int, messages: int, snapshots: Snapshots | None = None
) -> tuple[float, list[Cycle]]:
    """The engine's RSS after boot, and each cycle's rows."""
    command = snapshots.command if snapshots is not None else None
    load = SocketLoad(MEMORY_SETTINGS, command=command)
    cycles: list[Cycle] = []
    try:
        await load.start(SENDERS)
        await until_status(load, lambda status: bool(status["database"]["ready"]))
        await asyncio.sleep(AT_REST_S)
        boot_mb = load.rss_mb()
        if snapshots is not None:
            await snapshots.start(load)
        for number in range(1, cycles_to_run + 1):
            print(f"  cycle {number} of {cycles_to_run}...", file=sys.stderr, flush=True)
            load.replies.clear()
            read = messages // SSE_SHARE
            await drive(load.post, AGENTS, messages - read, SENDERS, load.replies, f"c{number}-")
            sse = SseReaders(load.paths.socket, SSE_READERS)
            await sse.start()
            load.replies.clear()
            await drive(load.post, AGENTS, read, SENDERS, load.replies, f"c{number}-r")
            after_load_mb = load.rss_mb()
            await sse.check(read)
            await sse.close()
            load.disconnect()
            await until_at_rest(load)
            cycles.append(Cycle(after_load_mb, load.rss_mb()))
            if snapshots is not None and number in (1, cycles_to_run):
                await snapshots.take(load)
    finally:
        load.stop()
    return boot_mb, cycles


def plateaus(cycles: list[Cycle]) -> bool:
    return all(
        abs(cycle.after_unload_mb / previous.after_unload_mb - 1) <= PLATEAU
        for previous, cycle in itertools.pairwise(cycles)
    )


def print_table(boot_mb: float, cycles: list[Cycle], messages: int) -> None:
    print(
        f"\nClayBot memory benchmark: {len(cycles)} cycles of {messages:,} messages to {AGENTS:,} "
        f"agents (the last {messages // SSE_SHARE:,} read by {SSE_READERS} SSE readers), each "
        f"followed by the idle unload of every agent (after 2 s); RSS after boot {boot_mb:.0f} MB\n"
    )
    print("| cycle | RSS after load (MB) | RSS after unload (MB) | unload vs previous |")
    print("|---:|---:|---:|---:|")
    previous: Cycle | None = None
    for number, cycle in enumerate(cycles, 1):
        change = (
            f"{(cycle.after_unload_mb / previous.after_unload_mb - 1) * 100:+.1f} %"
            if previous is not None
            else ""
        )
        print(f"| {number} | {cycle.after_load_mb:.0f} | {cycle.after_unload_mb:.0f} | {change} |")
        previous = cycle
    verdict = "plateaus" if plateaus(cycles) else "GROWS"
    print(f"\n{verdict}: each after-unload row within {PLATEAU:.0%} of the previous one")


def print_growth(first_path: Path, last_path: Path) -> None:
    """What the last snapshot holds that the first did not, by line and by traceback."""
    ignored = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
        tracemalloc.Filter(False, "<unknown>"),
    ]
    first = tracemalloc.Snapshot.load(str(first_path)).filter_traces(ignored)
    last = tracemalloc.Snapshot.load(str(last_path)).filter_traces(ignored)
    by_line = last.compare_to(first, "lineno")
    total = sum(stat.size_diff for stat in by_line)
    blocks = sum(stat.count_diff for stat in by_line)
    print(
        f"\ntracemalloc, after the last unload against after the first: "
        f"{total / 2**20:+.2f} MB in {blocks:+,} blocks\n"
    )
    print("| size | blocks | allocated at |")
    print("|---:|---:|---|")
    for stat in by_line[:SHOWN]:
        frame = stat.traceback[0]
        print(
            f"| {stat.size_diff / 2**10:+,.0f} KB | {stat.count_diff:+,} "
            f"| {frame.filename}:{frame.lineno} |"
        )
    print("\nLargest growth by traceback (innermost frame first):")
    for stat in last.compare_to(first, "traceback")[:SHOWN]:
        print(f"\n{stat.size_diff / 2**10:+,.0f} KB in {stat.count_diff:+,} blocks")
        for line in stat.traceback.format(limit=10, most_recent_first=True):
            print(f"  {line}")


async def run_memory(traced: bool, cycles_to_run: int = CYCLES, messages: int = MESSAGES) -> bool:
    """Print the table (and with ``traced`` the tracemalloc comparison); whether the
    cycles plateau."""
    print(f"running {cycles_to_run} memory cycles...", file=sys.stderr, flush=True)
    snapshots = Snapshots() if traced else None
    boot_mb, cycles = await bench_memory(cycles_to_run, messages, snapshots)
    print_table(boot_mb, cycles, messages)
    if snapshots is not None:
        print_growth(snapshots.taken[0], snapshots.taken[-1])
        shutil.rmtree(snapshots.folder, ignore_errors=True)
    return plateaus(cycles)
