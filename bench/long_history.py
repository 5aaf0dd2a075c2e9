"""The "long history" rows of bench/agents.py: one agent whose history.jsonl already
holds 1,000, 10,000 or 100,000 records when the engine starts.

For each size, through the socket, on an engine started on that home:

- the first turn after a restart: a message to the agent (not loaded yet) until its
  reply's ``agent.outgoing`` event, so it includes loading the agent from its files
  (the median over five starts of the engine, each once its database is open);
- then, once the engine has settled, reply p50 over 100 turns, one message in flight;
- a history page (``limit=50``) p50/p99, at numbers spread over the whole history
  (``before``), the newest page and forward pages (``after``) among them;
- the engine's resident memory after all that, and the history's bytes on disk.

Run by ``bench/agents.py`` (all of it, or ``--long-history`` for this table alone).
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from agents import SETTINGS, RawClient, SocketLoad, populate, until_status
from claybot.config.home import HomePaths

SIZES = (1_000, 10_000, 100_000)
TURNS = 100
RESTARTS = 5  # the first turn after a restart is the median over this many starts
PAGES = 300
PAGE_LIMIT = 50


@dataclass(frozen=True)
class LongHistoryRow:
    records: int
    history_mb: float
    first_turn_ms: float
    reply_p50_ms: float
    page_p50_ms: float
    page_p99_ms: float
    rss_mb: float


def _one_agent(records: int) -> tuple[list[str], Callable[[HomePaths], None]]:
    """A home's preparation that writes one agent with ``records`` records, and the
    list its id lands in."""
    found: list[str] = []

    def prepare(paths: HomePaths) -> None:
        paths.agents.mkdir(parents=True)
        populate(paths, 1, records)
        # On disk, as after any restart: otherwise the first fsync of the history
        # (the first turn's) writes the whole file the benchmark just made.
        os.sync()
        found.extend(p.name for p in paths.agents.iterdir() if p.is_dir())

    return found, prepare


async def _turn(load: SocketLoad, message_id: str) -> float:
    """Milliseconds from the post to its reply's event, user0's agent."""
    started = time.perf_counter()
    await load.post("user0", message_id)
    while message_id not in load.replies:
        await asyncio.sleep(0.0005)
    return (load.replies[message_id] - started) * 1000


async def bench_long_history(records: int) -> LongHistoryRow:
    found, prepare = _one_agent(records)
    load = SocketLoad(SETTINGS, prepare=prepare)
    try:
        await load.start(1)
        (agent_id,) = found
        history = load.paths.agents / agent_id / "history.jsonl"
        first_turns = []
        for n in range(RESTARTS):
            if n:
                await load.restart()
            # Once the engine has settled: its database opens on a thread after the
            # socket is up (SQLAlchemy's import, 150 ms of the interpreter's lock),
            # which is not what this row is about.
            await until_status(load, lambda status: bool(status["database"]["ready"]))
            first_turns.append(await _turn(load, f"first-after-restart-{n}"))
        replies = [await _turn(load, f"turn-{n}") for n in range(TURNS)]
        client = RawClient(load.paths.socket)
        rng = random.Random(records)
        total = records + 2 * (TURNS + RESTARTS)  # a message and its reply each
        path = f"/v1/engine/agents/{agent_id}/history?limit={PAGE_LIMIT}"
        pages: list[float] = []
        for n in range(PAGES):
            if n % 10 == 0:
                query = path  # the newest page, what a chat view opens on
            elif n % 3 == 0:
                query = f"{path}&after={rng.randrange(-1, total)}"
            else:
                query = f"{path}&before={rng.randrange(0, total + 1)}"
            started = time.perf_counter()
            status, body = await client.get(query)
            pages.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"history page failed: {status} {body[:200]!r}")
        pages.sort()
        return LongHistoryRow(
            records=records,
            history_mb=history.stat().st_size / 2**20,
            first_turn_ms=statistics.median(first_turns),
            reply_p50_ms=statistics.median(replies),
            page_p50_ms=statistics.median(pages),
            page_p99_ms=pages[int(len(pages) * 0.99) - 1],
            rss_mb=load.rss_mb(),
        )
    finally:
        load.stop()


def print_table(rows: list[LongHistoryRow]) -> None:
    print("\n| long history (one agent) | history on disk | first turn after restart "
          "| reply p50 | history page p50 | history page p99 | engine RSS |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.records:,} records | {row.history_mb:.1f} MB | {row.first_turn_ms:.1f} ms "
            f"| {row.reply_p50_ms:.2f} ms | {row.page_p50_ms:.2f} ms | {row.page_p99_ms:.2f} ms "
            f"| {row.rss_mb:.0f} MB |"
        )
    print(
        f"\nPages of {PAGE_LIMIT} records at numbers spread over the history ({PAGES} reads); "
        f"reply p50 over {TURNS} turns, one message in flight."
    )
