"""Multi-tenant mixes of the shipped real traces under each walker and scheduler component.

    PYTHONPATH=. python benchmarks/multitenant.py [--tenants 2,4,8] [--oversub F]
        [--walkers shared,partitioned,dws] [--scheduler interleave,mfit] [--out FILE.csv]

A mix of n tenants cycles through CNNs and a transformer (resnet50_pca, gpt2_small,
resnet50_nopca, gpt2_small, ...) from traces/. Translation is on (the Translation
defaults) so the walker components matter; capacity is the sum of the tenants' peak blocks
over --oversub. Prints one line per (mix, walkers, scheduler) with the system metrics and
each tenant's slowdown, and writes every tenant row with --out.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import uvmsim

ROOT = Path(__file__).resolve().parents[1]
CYCLE = ("resnet50_pca", "gpt2_small", "resnet50_nopca", "gpt2_small")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", default="2,4,8")
    ap.add_argument("--oversub", type=float, default=1.5)
    ap.add_argument("--walkers", default="shared,partitioned,dws")
    ap.add_argument("--scheduler", default="interleave,mfit")
    ap.add_argument("--out")
    a = ap.parse_args()
    traces = {n: uvmsim.load_trace(ROOT / "traces" / f"{n}.uvmtrace") for n in set(CYCLE)}
    rows = []
    print("| tenants | walkers | scheduler | STP | ANTT | fairness | slowdowns | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in a.tenants.split(",")):
        mix = [traces[CYCLE[i % len(CYCLE)]] for i in range(n)]
        for wk in a.walkers.split(","):
            for sc in a.scheduler.split(","):
                t0 = time.perf_counter()
                mr = uvmsim.simulate_multi(mix, oversub=a.oversub, translation=True,
                                           walkers=wk, scheduler=sc)
                wall = time.perf_counter() - t0
                s = mr.system
                print(f"| {n} | {wk} | {sc} | {s['stp']:.3f} | {s['antt']:.3f} | "
                      f"{s['fairness']:.3f} | "
                      f"{' '.join(f'{x:.2f}' for x in mr.slowdown)} | {wall:.1f} |")
                df = mr.table.copy()
                df.insert(1, "trace", [CYCLE[i % len(CYCLE)] for i in range(n)])
                df.insert(0, "walkers", wk)
                df.insert(0, "scheduler", sc)
                df.insert(0, "mix", n)
                rows.append(df)
    if a.out:
        pd.concat(rows).to_csv(a.out, index=False)
        print(f"table: {a.out}")


if __name__ == "__main__":
    main()
