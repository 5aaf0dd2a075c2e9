"""Compare bench/jobs.py's ClayBot rows between an earlier revision and this tree, in one run.

Each side's row comes from its own ``bench/jobs.py`` (``claybot_row``, present in both),
run from its own source tree (the earlier one checked out into a temporary git worktree,
imported through ``PYTHONPATH``) with the same virtual environment, one row at a time in
a fresh process on the engine's own event loop. The sides alternate row by row,
``--rounds`` times, the first side changing from one round to the next, so that the two
runs of a pair are seconds apart (see ``compare_agents.py`` for why whole tables one after
the other say little on a shared machine). Prints each side's median jobs/s and claim p50,
and the median of the pairs' changes; a throughput that fell by more than ``--tolerance``
percent (by that median) is marked.

    .venv/bin/python bench/compare_jobs.py [--before 844e30c] [--rounds 3] [--jobs 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# 844e30c: the last commit before issue 40 (ports, typed seams, one conversation model).
DEFAULT_BEFORE = "844e30c"
# Run in each side's tree: one ClayBot row of its bench, printed as JSON.
ONE_ROW = """
import json, logging, statistics, sys, tempfile
from pathlib import Path
import jobs
from claybot.kernel.event_loop import event_loop_runner
database = sys.argv[1]
in_engine, processes, count = (int(value) for value in sys.argv[2:5])
logging.disable(logging.WARNING)
with tempfile.TemporaryDirectory(prefix="claybot-compare-jobs-") as scratch:
    with event_loop_runner() as runner:
        row = runner.run(jobs.claybot_row(database, in_engine, processes, count, Path(scratch)))
print(json.dumps({"rate": row.rate, "claim_p50_ms": statistics.median(row.claim_ms)}))
"""
# (database, in-engine workers, `claybot worker` processes): the table's ClayBot rows that
# tell the store's and the runner's cost apart.
ROWS = [("SQLite", 1, 0), ("SQLite", 4, 0), ("PostgreSQL", 4, 0), ("PostgreSQL", 32, 0)]


def row_name(database: str, in_engine: int, processes: int) -> str:
    if processes:
        return f"{database}, {processes} `claybot worker` x 32"
    return f"{database}, {in_engine} in-engine worker{'s' if in_engine > 1 else ''}"


def run_row(
    tree: Path, database: str, in_engine: int, processes: int, jobs: int
) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree / 'bench'}"}
    command = [sys.executable, "-c", ONE_ROW, database, str(in_engine), str(processes), str(jobs)]
    done = subprocess.run(
        command, cwd=tree / "bench", env=environment, capture_output=True, text=True
    )
    if done.returncode != 0:
        name = row_name(database, in_engine, processes)
        raise RuntimeError(f"{name} failed in {tree}:\n{done.stderr}")
    measures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return measures


def change(before: float, after: float) -> float:
    return (after - before) / before * 100


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", default=DEFAULT_BEFORE, help="the earlier revision")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row on each side")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per row's run")
    parser.add_argument("--tolerance", type=float, default=5.0, help="percent worse to mark")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claybot-before-") as scratch:
        before_tree = Path(scratch) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(before_tree), args.before],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        trees = {"before": before_tree, "after": ROOT}
        try:
            print(f"before: {args.before}; after: this tree; {args.jobs} jobs a run, "
                  f"{args.rounds} alternated runs of each row", flush=True)  # fmt: skip
            print()
            print("| row | before jobs/s | after jobs/s | change (median of pairs) | pairs "
                  "| claim p50 ms before / after |")  # fmt: skip
            print("|---|---:|---:|---:|---|---:|")
            for database, in_engine, processes in ROWS:
                runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
                for round_number in range(args.rounds):
                    order = ["before", "after"] if round_number % 2 == 0 else ["after", "before"]
                    for side in order:
                        runs[side].append(
                            run_row(trees[side], database, in_engine, processes, args.jobs)
                        )
                rates = {side: [run["rate"] for run in runs[side]] for side in runs}
                pairs = [change(b, a) for b, a in zip(rates["before"], rates["after"], strict=True)]
                median_change = statistics.median(pairs)
                mark = " **slower**" if median_change < -args.tolerance else ""
                claims = {
                    side: statistics.median(run["claim_p50_ms"] for run in runs[side])
                    for side in runs
                }
                print(
                    f"| {row_name(database, in_engine, processes)} "
                    f"| {statistics.median(rates['before']):,.0f} "
                    f"| {statistics.median(rates['after']):,.0f} "
                    f"| {median_change:+.1f} %{mark} "
                    f"| {', '.join(f'{p:+.0f}' for p in pairs)} "
                    f"| {claims['before']:.1f} / {claims['after']:.1f} |",
                    flush=True,
                )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before_tree)],
                cwd=ROOT, check=False, capture_output=True,
            )  # fmt: skip


if __name__ == "__main__":
    main()
