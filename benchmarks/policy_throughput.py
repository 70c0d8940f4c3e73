"""Access rows per second of every built-in policy on one synthetic trace (compile excluded).

    PYTHONPATH=. python benchmarks/policy_throughput.py [--steps N] [--oversub F]

Each prefetch policy runs with lru2m and each eviction policy with density; the ratio column is
the policy's rate over density+lru2m's (the issue asks for each within 3x, or the reason).
"""
from __future__ import annotations

import argparse
import platform
import time

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
    t = synth.make("training", layers=8, steps=ARGS.steps, seed=1)
    print(f"# trace: synth training(layers=8, steps={ARGS.steps}), {t.n_accesses:,} rows, "
          f"oversub {ARGS.oversub}; {platform.processor() or platform.machine()}")
    base, _ = rate(t, "density", "lru2m", ARGS.reps)
    print("| policy | kind | Mrows/s | vs density+lru2m | faults | evicted_chunks |")
    print("|---|---|---|---|---|---|")
    pairs = [(p, "lru2m", "prefetch") for p in PREFETCH] + \
            [("density", e, "evict") for e in EVICT]
    for pf, ev, kind in pairs:
        r, s = rate(t, pf, ev, ARGS.reps)
        name = pf if kind == "prefetch" else ev
        print(f"| {name} | {kind} | {r / 1e6:.1f} | {r / base:.2f} | {s['faults']:,} | "
              f"{s['evicted_chunks']:,} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--oversub", type=float, default=1.25)
    ap.add_argument("--reps", type=int, default=3)
    ARGS = ap.parse_args()
    main()
