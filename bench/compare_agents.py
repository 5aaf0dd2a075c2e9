"""Compare bench/agents.py between an earlier revision and this tree, in one run.

Each side's rows come from its own ``bench/agents.py`` (``bench_in_process`` and
``bench_socket``, present in both), run from its own source tree (the earlier one
checked out into a temporary git worktree, imported through ``PYTHONPATH``) with the
same virtual environment, one row at a time in a fresh process (the rows, and the messages
each is sent, are those of this tree's table: ``table_rows``). The sides alternate
row by row, ``--rounds`` times per row, the first side changing from one round to
the next, so that each pair of runs is seconds apart: on a shared machine a row
moves by 10-25 % from one minute to the next, and whole tables run one after the
other (the way this script worked before) gave the same code verdicts 20 % apart.
Prints, for each measure, both sides' medians, the median of the pairs' changes
(each round's after against the same round's before: what drift cancels out of),
and every pair's change. A throughput that fell, or a latency or boot time that
rose, by more than ``--tolerance`` (by the median of the pairs) is marked.

Boot is timed here for both sides, not taken from their tables: the two revisions'
scripts probe for readiness differently (the earlier one built an HTTP client per
try, which cost more than the change to be seen). Each side starts on its own home
of 10,000 agents (written once by this tree's ``populate``, the same format on both
sides), alternately, ``--boot-starts`` times, with this tree's probe.

    .venv/bin/python bench/compare_agents.py [--before 09b34e5] [--rounds 5] [--messages N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from agents import fresh_home, populate, start_engine, table_rows

ROOT = Path(__file__).resolve().parent.parent
# 09b34e5: the last commit before the layering of issue 10.
DEFAULT_BEFORE = "09b34e5"
# Run in each side's tree: one row of its bench, printed as JSON.
ONE_ROW = """
import asyncio, dataclasses, json, sys
import agents
path, count, messages, readers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if path == "in-process":
    row = asyncio.run(agents.bench_in_process(count, messages))
else:
    row = asyncio.run(agents.bench_socket(count, messages, readers=readers))
print(json.dumps(dataclasses.asdict(row)))
"""
MEASURES = {  # what the comparison calls each measure: the bench's Row field
    "msg/s": "rate",
    "accept p50 ms": "accept_p50_ms",
    "accept p99 ms": "accept_p99_ms",
    "reply p50 ms": "reply_p50_ms",
    # Engine CPU per message while saturated (the socket rows only: the in-process rows
    # share their process with the load): the engine's cost, whatever the scheduling.
    "engine CPU ms/msg": "engine_cpu_ms",
}
BOOT_MEASURE = "boot, 10,000 agents: ms"


def row_name(path: str, agents: int, readers: int) -> str:
    extra = f" + {readers} SSE readers" if readers else ""
    return f"{path}{extra}, {agents:,} agents"


def run_row(tree: Path, path: str, agents: int, messages: int, readers: int) -> dict[str, float]:
    """One row of ``tree``'s bench, in a process of its own: its measures."""
    environment = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree / 'bench'}"}
    command = [sys.executable, "-c", ONE_ROW, path, str(agents), str(messages), str(readers)]
    done = subprocess.run(
        command, cwd=tree / "bench", env=environment, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{row_name(path, agents, readers)} failed in {tree}:\n{done.stderr}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        measure: float(row[field])
        for measure, field in MEASURES.items()
        if row.get(field) is not None
    }


def boot_times(trees: dict[str, Path], starts: int) -> dict[str, list[float]]:
    """Milliseconds from process start to an answer, each side's engine alternately."""
    homes = {}
    for side in trees:
        paths = fresh_home()
        paths.agents.mkdir(parents=True)
        populate(paths, 10_000, 100)
        homes[side] = paths
    environments = {side: {"PYTHONPATH": str(tree / "src")} for side, tree in trees.items()}
    times: dict[str, list[float]] = {side: [] for side in trees}
    try:
        for start_number in range(starts + 1):  # the first start of each migrates its home
            order = list(trees) if start_number % 2 == 0 else list(reversed(trees))
            for side in order:
                process, boot_s = start_engine(homes[side], environments[side])
                process.terminate()
                process.wait(30)
                if start_number:
                    times[side].append(boot_s * 1000)
    finally:
        for paths in homes.values():
            shutil.rmtree(paths.home, ignore_errors=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", default=DEFAULT_BEFORE, help="the earlier revision")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each row on each side")
    parser.add_argument("--messages", type=int, default=10_000, help="messages per row's run")
    parser.add_argument(
        "--boot-starts",
        type=int,
        default=15,
        help="engine starts of each side, alternated (0: none)",
    )
    parser.add_argument("--tolerance", type=float, default=5.0, help="percent worse to mark")
    parser.add_argument(
        "--row",
        action="append",
        default=None,
        help="only this row, named as printed ('in-process, 1,000 agents'); may be repeated "
        "(a row whose measures moved within their pairs' spread, run again with more rounds)",
    )
    args = parser.parse_args()
    rows = table_rows(args.messages)
    if args.row:
        named = {row_name(path, agents, readers) for path, agents, _, readers in rows}
        unknown = set(args.row) - named
        if unknown:
            parser.error(f"no such row: {', '.join(sorted(unknown))} (rows: {', '.join(named)})")
        rows = [row for row in rows if row_name(row[0], row[1], row[3]) in args.row]
    # measure -> side -> one figure per round
    series: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="claybot-compare-") as scratch:
        before_tree = Path(scratch) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(before_tree), args.before],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        trees = {"before": before_tree, "after": ROOT}
        try:
            for tree in trees.values():  # bytecode first, as `make run` has it
                subprocess.run(
                    [sys.executable, "-m", "compileall", "-q", str(tree / "src")], check=True
                )
            for path, agents, messages, readers in rows:
                name = row_name(path, agents, readers)
                for round_number in range(args.rounds):
                    order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
                    for side in order:
                        print(f"{name}, round {round_number + 1}: {side}...", file=sys.stderr,
                              flush=True)  # fmt: skip
                        measured = run_row(trees[side], path, agents, messages, readers)
                        for measure, value in measured.items():
                            sides = series.setdefault(f"{name}: {measure}", {})
                            sides.setdefault(side, []).append(value)
            if args.boot_starts:
                print("boot, alternated starts...", file=sys.stderr, flush=True)
                series[BOOT_MEASURE] = boot_times(trees, args.boot_starts)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before_tree)],
                cwd=ROOT, check=False, capture_output=True,
            )  # fmt: skip
    print_comparison(series, args)


def print_comparison(series: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> None:
    print(
        f"\nbench/agents.py, {args.before} against this tree: {args.rounds} alternated runs of "
        f"each row on each side (boot: {args.boot_starts} starts each)\n"
    )
    print("| measure | before | after | change (median of pairs) | each pair's change |")
    print("|---|---:|---:|---:|---|")
    worst = 0.0
    for measure, sides in series.items():
        befores, afters = sides["before"], sides["after"]
        pairs = zip(befores, afters, strict=True)
        changes = [(after / before - 1) * 100 for before, after in pairs]
        change = statistics.median(changes)
        # Throughput should not fall; a latency or a boot time should not rise.
        worse = -change if measure.endswith("msg/s") else change
        worst = max(worst, worse)
        mark = " (worse)" if worse > args.tolerance else ""
        each = " ".join(f"{value:+.0f}" for value in changes)
        print(
            f"| {measure} | {statistics.median(befores):,.2f} | {statistics.median(afters):,.2f} "
            f"| {change:+.1f} %{mark} | {each} |"
        )
    print(f"\nWorst change: {worst:.1f} % (tolerance {args.tolerance:g} %).")


if __name__ == "__main__":
    main()
