"""One validation run replayed kernel by kernel: faults, fault batches, bytes and time.

    python benchmarks/validate/kernel_batches.py WORKLOAD FACTOR [--card h100]
        [--results benchmarks/validate/results/h100] [--option NAME=on|off|N|WORD ...]
        [--set CONSTANT=VALUE ...]

The run is the row of fit.py's real runs (same capacity, same model per card, the same
--option and --set as fit.py predict); the trace is benchmarks/validate/traces/WORKLOAD.
Prints one line per kernel that faulted, then the real run's time beside the replay's.
docs/validation.md ("How many services a first touch takes") quotes it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import fit  # this folder's

from uvmsim import simulate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("factor", type=float)
    ap.add_argument("--card", default="h100")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.results is not None:
        fit.RESULTS = a.results.resolve()
    runs = fit.load_runs()
    r = runs[(runs["workload"] == a.workload) & (runs["card"] == a.card)
             & (runs["factor"] == a.factor)]
    if r.empty:
        raise SystemExit(f"no {a.card} run of {a.workload} at factor {a.factor:g}")
    r = r.iloc[0]
    model = fit.model_maker("auto", *fit.parse_settings(a.option, a.set))(a.card)
    res = simulate(fit.trace_of(a.workload, a.card), model=model,
                   capacity_bytes=int(r["capacity_bytes"]))
    k = res.kernels
    k = k[k["faults"] > 0]
    print("| kernel | faults | batches | faults per batch | HtoD MB | evicted chunks | "
          "stall ms |")
    print("|---|---|---|---|---|---|---|")
    for _, x in k.iterrows():
        print(f"| {x['kernel_id']} {x['name'].split('(')[0]} | {x['faults']:,} | "
              f"{x['fault_batches']:,} | {x['faults'] / max(x['fault_batches'], 1):.0f} | "
              f"{x['htod_bytes'] / 1e6:.0f} | {x['evicted_chunks']:,} | "
              f"{x['stall_ns'] / 1e6:.1f} |")
    print(f"real {r['real_s']:.3f} s, replayed {res.kernels['sim_ns'].sum() / 1e9:.3f} s "
          f"({model.name}, capacity {int(r['capacity_bytes']):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
