"""Replay speed of two checkouts of uvmsim, measured alternately in one run.

    git worktree add /tmp/uvmsim-before <commit>
    python benchmarks/before_after.py --before /tmp/uvmsim-before --after . --rounds 5

Each round runs, for the two trees in turn (the order alternating from round to round, so a
drift of the machine's load falls on both alike), each tree's own
`benchmarks/replay_throughput.py --repeat 1` (the training trace), `--fault-heavy --repeat 1`
(three cases) and `benchmarks/policy_throughput.py --reps 3` (every policy), with that
tree's sources first on the path (checked: each tree imports its own uvmsim) and its own
engine cache. The rows/s of every run are kept;
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
import time
from pathlib import Path

RATE = re.compile(r"replay\s+[\d.]+ s = ([\d.]+) M rows/s")
CASE = re.compile(r"^\[fault-heavy\] (factor [\d.]+, \S+)")
POLICY = re.compile(r"^\| (\w+) \| (prefetch|evict) \| ([\d.]+) \|")


def source_dir(tree: Path) -> Path:
    """The folder holding a tree's uvmsim package: src/ today, the tree itself in checkouts
    from before the src layout."""
    return tree / "src" if (tree / "src" / "uvmsim").is_dir() else tree


def share_traces(before: Path, after: Path) -> None:
    """Both trees replay the same trace files: the after tree's benchmarks/out becomes a
    link to the before tree's when it has none."""
    shared = before / "benchmarks" / "out"
    shared.mkdir(parents=True, exist_ok=True)
    mine = after / "benchmarks" / "out"
    if not mine.exists():
        mine.symlink_to(shared, target_is_directory=True)


def env_of(tree: Path, cache: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(source_dir(tree)), UVMSIM_CACHE_DIR=str(cache))


def check_import(tree: Path, cache: Path) -> None:
    """Each tree's benchmarks must import that tree's uvmsim. A script's own folder, not the
    working directory, starts sys.path, so with a wrong PYTHONPATH an installed uvmsim (an
    editable install of the other tree) would be measured instead, silently."""
    where = subprocess.run([sys.executable, "-c", "import uvmsim; print(uvmsim.__file__)"],
                           cwd="/", env=env_of(tree, cache), check=True, capture_output=True,
                           text=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree} would measure the uvmsim at {where}")


def run(tree: Path, cache: Path, args: list[str]) -> str:
    return subprocess.run([sys.executable, *args], cwd=tree, env=env_of(tree, cache),
                          check=True, capture_output=True, text=True).stdout


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
    ap.add_argument("--cache-dir", type=Path,
                    help="keep each tree's engine cache here (default: fresh temporary ones)")
    ap.add_argument("--deadline-s", type=float, default=float("inf"),
                    help="start no round after this many seconds (a later round would not "
                         "finish inside a caller's time limit)")
    ap.add_argument("--table", type=Path,
                    help="also write the table here after every round, so that a run stopped "
                         "part-way keeps the rounds it finished")
    a = ap.parse_args()
    start = time.monotonic()
    trees = {"before": a.before.resolve(), "after": a.after.resolve()}
    share_traces(trees["before"], trees["after"])
    if a.cache_dir:
        caches = {k: a.cache_dir / k for k in trees}
        for c in caches.values():
            c.mkdir(parents=True, exist_ok=True)
    else:
        caches = {k: Path(tempfile.mkdtemp(prefix=f"uvmsim-{k}-cache-")) for k in trees}
    for k in trees:
        check_import(trees[k], caches[k])
    runs: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    for i in range(a.rounds):
        if i and time.monotonic() - start > a.deadline_s:
            print(f"deadline: {i} of {a.rounds} rounds", file=sys.stderr, flush=True)
            break
        for k in (("before", "after") if i % 2 == 0 else ("after", "before")):
            for case, v in measure(trees[k], caches[k], not a.no_policies).items():
                runs[k].setdefault(case, []).append(v)
            print(f"round {i + 1}/{a.rounds} {k}: done", file=sys.stderr, flush=True)
        if a.table:
            a.table.write_text(table(runs))
    print(table(runs), end="")


def table(runs: dict[str, dict[str, list[float]]]) -> str:
    """Each case's median and best over the rounds, before and after, and their ratios; then
    every run. Only rounds both trees finished count."""
    n = min(len(v) for k in runs for v in runs[k].values()) if runs["after"] else 0
    lines = [f"rounds: {n}",
             "| case | before median | after median | ratio | before best | after best | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for case in runs["before"]:
        b, f = runs["before"][case][:n], runs["after"].get(case, [])[:n]
        if not b or not f:
            continue
        bm, fm, bb, fb = statistics.median(b), statistics.median(f), max(b), max(f)
        lines.append(f"| {case} | {bm:.2f} | {fm:.2f} | {fm / bm:.3f} | {bb:.2f} | {fb:.2f} "
                     f"| {fb / bb:.3f} |")
    lines.append("\nall runs (M rows/s):")
    for k in runs:
        for case, v in runs[k].items():
            lines.append(f"  {k:6} {case}: " + ", ".join(f"{x:.2f}" for x in v))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
