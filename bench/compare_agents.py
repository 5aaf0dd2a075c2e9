"""Compare bench/agents.py between an earlier revision and this tree, in one run.

Each side runs its own ``bench/agents.py`` from its own source tree (the earlier one
checked out into a temporary git worktree, imported through ``PYTHONPATH``), with the
same virtual environment, alternating ``--rounds`` times so that the machine's
drift hits both alike. Prints each row's median on both sides and the change: a
throughput that fell, or a latency or boot time that rose, by more than
``--tolerance`` is marked. On a shared machine single runs of a row move by 10-25 %;
the medians of alternated rounds are what to read.

Boot is timed here for both sides, not taken from their tables: the two revisions'
scripts probe for readiness differently (the earlier one built an HTTP client per
try, which cost more than the change to be seen). Each side starts on its own home
of 10,000 agents (written once by this tree's ``populate``, the same format on both
sides), alternately, ``--boot-starts`` times, with this tree's probe.

    .venv/bin/python bench/compare_agents.py [--before 09b34e5] [--rounds 3] [--messages N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from agents import fresh_home, populate, start_engine

ROOT = Path(__file__).resolve().parent.parent
# 09b34e5: the last commit before the layering of issue 10.
DEFAULT_BEFORE = "09b34e5"
# | path | agents | messages | msg/s | accept p50 | accept p99 | reply p50 | reply p99 | ...
ROW = re.compile(r"^\| (in-process|socket[^|]*) \| ([\d,]+) \| [\d,]+ \| ([\d,]+) \|(.*)$")
BOOT_MEASURE = "boot, 10,000 agents: ms"


def run_bench(tree: Path, messages: int) -> dict[str, float]:
    """One run of ``tree``'s bench: every row's throughput and latencies."""
    environment = {**os.environ, "PYTHONPATH": str(tree / "src")}
    command = [sys.executable, str(tree / "bench" / "agents.py"), "--messages", str(messages)]
    if tree == ROOT:  # boot is timed apart (below); the earlier script has no such option
        command.append("--agents-table-only")
    done = subprocess.run(
        command, cwd=tree, env=environment, capture_output=True, text=True, check=True
    )
    measured: dict[str, float] = {}
    for line in done.stdout.splitlines():
        row = ROW.match(line)
        if row:
            name = f"{row.group(1)}, {row.group(2)} agents"
            measured[f"{name}: msg/s"] = float(row.group(3).replace(",", ""))
            cells = [cell.strip() for cell in row.group(4).split("|") if cell.strip()]
            for label, cell in zip(("accept p50", "accept p99", "reply p50"), cells, strict=False):
                measured[f"{name}: {label} ms"] = float(cell.split()[0])
    if not measured:
        raise RuntimeError(f"no table in the output of {tree}:\n{done.stdout}\n{done.stderr}")
    return measured


def spread(values: list[float]) -> str:
    """Each run's figure, lowest first: how far a row moves by itself on this machine."""
    return " ".join(f"{value:,.4g}" for value in sorted(values))


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
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side, alternated")
    parser.add_argument("--messages", type=int, default=10_000, help="messages per bench run")
    parser.add_argument(
        "--boot-starts", type=int, default=15, help="engine starts of each side, alternated"
    )
    parser.add_argument("--tolerance", type=float, default=5.0, help="percent worse to mark")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claybot-compare-") as scratch:
        before_tree = Path(scratch) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(before_tree), args.before],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        try:
            for tree in (before_tree, ROOT):  # bytecode first, as `make run` has it
                subprocess.run(
                    [sys.executable, "-m", "compileall", "-q", str(tree / "src")], check=True
                )
            sides: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for round_number in range(args.rounds):
                for side, tree in (("before", before_tree), ("after", ROOT)):
                    print(f"round {round_number + 1}: {side}...", file=sys.stderr, flush=True)
                    sides[side].append(run_bench(tree, args.messages))
            print("boot, alternated starts...", file=sys.stderr, flush=True)
            boots = boot_times({"before": before_tree, "after": ROOT}, args.boot_starts)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before_tree)],
                cwd=ROOT, check=False, capture_output=True,
            )  # fmt: skip
    print(
        f"\nbench/agents.py, {args.before} against this tree, medians of {args.rounds} rounds"
        f" (boot: of {args.boot_starts} starts each)\n"
    )
    print("| measure | before | after | change | before, each run | after, each run |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    series = {
        measure: (
            [run[measure] for run in sides["before"] if measure in run],
            [run[measure] for run in sides["after"]],
        )
        for measure in sides["after"][0]
    }
    series[BOOT_MEASURE] = (boots["before"], boots["after"])
    for measure, (befores, afters) in series.items():
        before, after = statistics.median(befores), statistics.median(afters)
        change = (after / before - 1) * 100
        # Throughput should not fall; a latency or a boot time should not rise.
        worse = -change if measure.endswith("msg/s") else change
        worst = max(worst, worse)
        mark = " (worse)" if worse > args.tolerance else ""
        print(
            f"| {measure} | {before:,.2f} | {after:,.2f} | {change:+.1f} %{mark} "
            f"| {spread(befores)} | {spread(afters)} |"
        )
    print(f"\nWorst change: {worst:.1f} % (tolerance {args.tolerance:g} %).")


if __name__ == "__main__":
    main()
