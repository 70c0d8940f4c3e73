"""Engine vs reference model: the same trace through both, identical results, wall times.

    PYTHONPATH=src python benchmarks/engine_vs_reference.py [--layers 4] [--steps 1] [--translation]

Prints a Markdown table row per configuration (append it to docs/performance.md).
"""
from __future__ import annotations

import argparse
import math
import platform
import time

import uvmsim
import uvmsim.reference as ref
from uvmsim.trace import synth


def _same(a: uvmsim.Result, b: uvmsim.Result) -> bool:
    for k, v in a.summary.items():
        w = b.summary[k]
        if isinstance(v, float):
            if not math.isclose(v, w, rel_tol=1e-9, abs_tol=1e-6):
                return False
        elif v != w:
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--oversub", type=float, default=1.5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trace = synth.make("training", layers=args.layers, steps=args.steps)
    print(f"trace: {trace!r}; python {platform.python_version()}, {platform.machine()}")
    print("| translation | rows | engine s | reference s | speedup | identical |")
    print("|---|---:|---:|---:|---:|---|")
    for tr in (None, True):
        kw = dict(oversub=args.oversub, translation=tr)
        uvmsim.simulate(trace, **kw)                      # compile (or load the cache)
        t_eng = min(_timed(lambda: uvmsim.simulate(trace, **kw)) for _ in range(args.repeat))
        t0 = time.perf_counter()
        b = ref.simulate(trace, **kw)
        t_ref = time.perf_counter() - t0
        a = uvmsim.simulate(trace, **kw)
        print(f"| {'on (defaults)' if tr else 'off'} | {trace.n_accesses:,} | {t_eng:.4f} | "
              f"{t_ref:.2f} | {t_ref / t_eng:,.0f}x | {_same(a, b)} |")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
