"""Benchmark the dashboard's pages: time to render each, with 10,000 agents.

Starts an engine on a home that already holds 10,000 agents of 100 history records each
(written straight in the on-disk format, as ``bench/agents.py`` does), logs in through a
one-time link as a browser would, and requests each page ``--runs`` times over loopback
TCP, one at a time. Prints p50 and p99 per page: the time from sending the request to the
last byte of the page, which on loopback is the engine's render time. The target of
issue 14 is a p99 under 50 ms for every page. (The job pages are not built yet.)

    .venv/bin/python bench/dashboard.py [--agents N] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import httpx

import claybot
from agents import compile_bytecode, fresh_home, populate, start_engine


def measure(base: str, link: str, agent_id: str, runs: int) -> list[tuple[str, float, float]]:
    rows = []
    with httpx.Client(base_url=base, timeout=60) as browser:
        assert browser.get(link).status_code == 303, "the login link did not log in"
        pages = [
            "/",
            "/agents",
            "/agents?q=user42",
            f"/agents/{agent_id}",
            f"/agents/{agent_id}?before=50",
            "/permissions",
            "/automations",
            "/proactive",
            "/settings/keys",
        ]
        for path in pages:
            browser.get(path)  # warm: the first render compiles the template
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                response = browser.get(path)
                times.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{path} answered {response.status_code}")
            times.sort()
            rows.append((path, statistics.median(times), times[max(0, int(len(times) * 0.99) - 1)]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=10_000, help="agents in the home")
    parser.add_argument("--runs", type=int, default=200, help="requests per page")
    args = parser.parse_args()
    compile_bytecode(Path(claybot.__file__).parent)
    paths = fresh_home()
    paths.agents.mkdir(parents=True)
    print(f"writing {args.agents:,} agents...", file=sys.stderr, flush=True)
    populate(paths, args.agents, 100)
    os.sync()
    agent_id = next(p.name for p in paths.agents.iterdir() if p.is_dir())
    process, _ = start_engine(paths)
    try:
        transport = httpx.HTTPTransport(uds=str(paths.socket))
        with httpx.Client(transport=transport, base_url="http://claybot") as owner:
            url = owner.post("/v1/engine/dashboard/links").json()["url"]
        base, link = url.split("/login", 1)[0], "/login" + url.split("/login", 1)[1]
        print("timing the pages...", file=sys.stderr, flush=True)
        rows = measure(base, link, agent_id, args.runs)
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(paths.home, ignore_errors=True)
    print(f"\nDashboard render time, {args.agents:,} agents x 100 records, ", end="")
    print(f"{args.runs} requests a page\n")
    print("| page | p50 | p99 |")
    print("|---|---:|---:|")
    for path, p50, p99 in rows:
        print(f"| `{path}` | {p50:.1f} ms | {p99:.1f} ms |")


if __name__ == "__main__":
    main()
