"""Access rows per second of every built-in policy on one trace (compile excluded).

    PYTHONPATH=src python benchmarks/policy_throughput.py [--steps N] [--oversub F]
    PYTHONPATH=src python benchmarks/policy_throughput.py --fault-heavy --oversub 3

Each prefetch policy runs with lru2m and each eviction policy with density; the ratio column is
the policy's rate over density+lru2m's (goal: each within 2x, or the reason written down in
docs/performance.md). The trace is synth training(layers=8, steps=N), or with --fault-heavy
the fault-heavy trace of benchmarks/replay_throughput.py. Runs pinned to one core.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import uvmsim
from uvmsim.policies import EVICT, PREFETCH
from uvmsim.trace import synth


def rate(t, pf: str, ev: str, reps: int) -> tuple[float, dict]:
    """Best-of-`reps` rows/s of one policy pair (after a warm-up that compiles it)."""
    uvmsim.simulate(t, oversub=ARGS.oversub, prefetch=pf, evict=ev)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        r = uvmsim.simulate(t, oversub=ARGS.oversub, prefetch=pf, evict=ev)
        best = min(best, time.perf_counter() - t0)
    return t.n_accesses / best, r.summary


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if ARGS.fault_heavy:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from replay_throughput import ensure_trace
        t = uvmsim.load_trace(ensure_trace("fault-heavy"))
        what = "fault-heavy (benchmarks/replay_throughput.py)"
    else:
        t = synth.make("training", layers=8, steps=ARGS.steps, seed=1)
        what = f"synth training(layers=8, steps={ARGS.steps})"
    print(f"# trace: {what}, {t.n_accesses:,} rows, oversub {ARGS.oversub}; "
          f"{platform.processor() or platform.machine()}, one core")
    base, _ = rate(t, "density", "lru2m", ARGS.reps)
    print("| policy | kind | Mrows/s | vs density+lru2m | faults | evicted_chunks |")
    print("|---|---|---|---|---|---|")
    pairs = [(p, "lru2m", "prefetch") for p in PREFETCH] + \
            [("density", e, "evict") for e in EVICT]
    for pf, ev, kind in pairs:
        if ARGS.only and (pf if kind == "prefetch" else ev) not in ARGS.only:
            continue
        r, s = rate(t, pf, ev, ARGS.reps)
        name = pf if kind == "prefetch" else ev
        print(f"| {name} | {kind} | {r / 1e6:.1f} | {r / base:.2f} | {s['faults']:,} | "
              f"{s['evicted_chunks']:,} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--oversub", type=float, default=1.25)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--fault-heavy", action="store_true",
                    help="replay the fault-heavy trace instead of the training one")
    ap.add_argument("--only", action="append", help="policy names to run (default: all)")
    ARGS = ap.parse_args()
    main()
