"""First-touch writes at factor 1, kernel by kernel: real and replayed time per zero-filled page.

    python benchmarks/validate/zero_fill_rates.py --traces DIR [--model h200-progress]

Every CUDA workload's factor-1 run on the H200 (results/real_runs.csv and results/h200_fill)
replayed as fit.py predict replays it; a kernel is listed where the replay zero-fills pages
and migrates nothing in, beside its real duration (the timing run's record in results/runs/).
Real ns a page is the whole kernel's time over its zero-filled pages, compute included.
docs/validation.md ("The memory PyTorch keeps for itself", the kernel tables) quotes it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import fit  # this folder's
from kernel_batches import _column, _kernel_record  # this folder's

from uvmsim import simulate

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--model", default="h200-progress")
    a = ap.parse_args()
    fit.TRACES = a.traces.resolve()
    print("| workload | kernel | blocks | zero-filled pages | faults | batches | real ms | "
          "replayed ms | real ns a page | replayed ns a page |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for results in (HERE / "results", HERE / "results" / "h200_fill"):
        fit.RESULTS = results
        runs = fit.load_runs()
        one = runs[(runs["factor"] == 1) & (runs["card"] == "h200") & (runs["kind"] == "cuda")]
        for _, r in one.iterrows():
            trace = fit.TRACES / f"{r['workload']}.uvmtrace"
            if not (trace / "manifest.json").exists():
                print(f"{trace}: missing, skipped", file=sys.stderr)
                continue
            t = fit.trace_of(r["workload"], "h200")
            res = simulate(t, model=a.model, capacity_bytes=int(r["capacity_bytes"]))
            k = res.kernels
            real = _column(_kernel_record(r["workload"], 1.0, ""), "duration_ns", len(k), 1.0)
            blocks = dict(zip(t.kernels["kernel_id"], t.kernels["n_blocks"])) \
                if "n_blocks" in t.kernels else {}   # the launch columns are v1.2's
            for i, x in k.iterrows():
                z = int(x["zero_fill_pages"])
                # whole fills only (16 MiB or more) of kernels the timing run recorded
                if z < 4096 or x["htod_bytes"] > 0 or real[i] != real[i]:
                    continue
                name = x["name"].split("(")[0]
                print(f"| {r['workload']} | {i} {name} | {blocks.get(i, '-')} | {z:,} | "
                      f"{int(x['faults']):,} | {int(x['fault_batches']):,} | "
                      f"{real[i] / 1e6:.1f} | {x['sim_ns'] / 1e6:.1f} | "
                      f"{real[i] / z:.0f} | {x['sim_ns'] / z:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
