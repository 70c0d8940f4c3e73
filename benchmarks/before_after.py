"""Replay speed of two checkouts of uvmsim, measured alternately in one run.

    git worktree add /tmp/uvmsim-before <commit>
    python benchmarks/before_after.py --before /tmp/uvmsim-before --after . --rounds 5

Each round runs, for the two trees in turn (the order alternating from round to round, so a
drift of the machine's load falls on both alike), each tree's own
`benchmarks/replay_throughput.py --repeat 1` (the training trace), `--fault-heavy --repeat 1`
(three cases) and `benchmarks/policy_throughput.py --reps 3` (every policy), with that
tree's sources first on the path and its own engine cache. The rows/s of every run are kept;
the table gives each case's median over the rounds, before and after, and their ratio. The
first round compiles each tree's engines (cached for the later rounds; compile time is not
in any figure). Both trees replay the same trace files: the after tree's benchmarks/out is
made a link to the before tree's when it has none.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RATE = re.compile(r"replay\s+[\d.]+ s = ([\d.]+) M rows/s")
CASE = re.compile(r"^\[fault-heavy\] (factor [\d.]+, \S+)")
POLICY = re.compile(r"^\| (\w+) \| (prefetch|evict) \| ([\d.]+) \|")


def run(tree: Path, cache: Path, args: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), UVMSIM_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, check=True,
                          capture_output=True, text=True).stdout


def measure(tree: Path, cache: Path, policies: bool) -> dict[str, float]:
    """M rows/s of every case, for one tree, once."""
    out: dict[str, float] = {}
    text = run(tree, cache, ["benchmarks/replay_throughput.py", "--repeat", "1"])
    out["replay: training, density/lru2m, factor 1.5"] = float(RATE.search(text).group(1))
    text = run(tree, cache, ["benchmarks/replay_throughput.py", "--fault-heavy", "--repeat", "1"])
    case = None
    for line in text.splitlines():
        m = CASE.match(line)
        if m:
            case = m.group(1)
        m = RATE.search(line)
        if m and case:
            out[f"replay: fault-heavy, {case}"] = float(m.group(1))
            case = None
    if policies:
        text = run(tree, cache, ["benchmarks/policy_throughput.py", "--reps", "3"])
        for line in text.splitlines():
            m = POLICY.match(line)
            if m:
                out[f"policy: {m.group(1)} ({m.group(2)})"] = float(m.group(3))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-policies", action="store_true", help="skip policy_throughput.py")
    a = ap.parse_args()
    trees = {"before": a.before.resolve(), "after": a.after.resolve()}
    shared = trees["before"] / "benchmarks" / "out"
    shared.mkdir(parents=True, exist_ok=True)
    mine = trees["after"] / "benchmarks" / "out"
    if not mine.exists():
        mine.symlink_to(shared, target_is_directory=True)
    caches = {k: Path(tempfile.mkdtemp(prefix=f"uvmsim-{k}-cache-")) for k in trees}
    runs: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    for i in range(a.rounds):
        for k in (("before", "after") if i % 2 == 0 else ("after", "before")):
            for case, v in measure(trees[k], caches[k], not a.no_policies).items():
                runs[k].setdefault(case, []).append(v)
            print(f"round {i + 1}/{a.rounds} {k}: done", file=sys.stderr, flush=True)
    print(f"| case | before (M rows/s) | after (M rows/s) | after / before |")
    print("| --- | --- | --- | --- |")
    for case in runs["before"]:
        b = statistics.median(runs["before"][case])
        f = statistics.median(runs["after"].get(case, [float("nan")]))
        print(f"| {case} | {b:.1f} | {f:.1f} | {f / b:.3f} |")
    print("\nall runs:")
    for k in trees:
        for case, v in runs[k].items():
            print(f"  {k:6} {case}: " + ", ".join(f"{x:.1f}" for x in v))


if __name__ == "__main__":
    main()
