"""One validation run replayed kernel by kernel: faults, fault batches, bytes and time.

    python benchmarks/validate/kernel_batches.py WORKLOAD FACTOR [--card h100] [--model M]
        [--results benchmarks/validate/results/h100] [--traces DIR] [--context KIND=MiB,...]
        [--option NAME=on|off|N|WORD ...] [--set CONSTANT=VALUE ...]

The run is the row of fit.py's real runs (same capacity, same model per card, the same
--option and --set as fit.py predict); the trace is WORKLOAD in --traces (default
benchmarks/validate/traces). Prints one line per kernel that faulted in the replay or in
the real run, with the real kernel's time (the run's record in results/runs/, when there)
and CUPTI's fault records and HtoD/DtoH bytes for it (the counters' run at the same factor,
when there: lower bounds, docs/model.md item 8; where the run's CUPTI totals equal the
driver's own count, results/remeasured/, nothing was lost), then the real run's time beside
the replay's.
docs/validation.md ("How many services a first touch takes") quotes it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import fit  # this folder's

from uvmsim import simulate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("factor", type=float)
    ap.add_argument("--card", default="h100")
    ap.add_argument("--model", default="auto",
                    help="a registered model, or auto: the card's (as fit.py predict)")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--traces", type=Path, default=None)
    ap.add_argument("--context", default=fit.DEFAULT_CONTEXT,
                    help=f"as fit.py's (default {fit.DEFAULT_CONTEXT})")
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    if a.results is not None:
        fit.RESULTS = a.results.resolve()
    if a.traces is not None:
        fit.TRACES = a.traces.resolve()
    runs = fit.load_runs(a.context)
    r = runs[(runs["workload"] == a.workload) & (runs["card"] == a.card)
             & (runs["factor"] == a.factor)]
    if r.empty:
        raise SystemExit(f"no {a.card} run of {a.workload} at factor {a.factor:g}")
    r = r.iloc[0]
    model = fit.model_maker(a.model, *fit.parse_settings(a.option, a.set))(a.card)
    res = simulate(fit.trace_of(a.workload, a.card), model=model,
                   capacity_bytes=int(r["capacity_bytes"]))
    k = res.kernels
    timing = _kernel_record(a.workload, a.factor, "")
    counters = _kernel_record(a.workload, a.factor, "__counters")
    real_us = _column(timing, "duration_ns", len(k), 1e-3)
    records = _column(counters, "gpu_fault_records", len(k), 1)
    real_h = _column(counters, "htod_bytes", len(k), 1e-6)
    real_d = _column(counters, "dtoh_bytes", len(k), 1e-6)
    print("| kernel | faults | batches | faults per batch | HtoD MB | DtoH MB | evicted chunks | "
          "stall ms | replayed us | real us | real fault records | real HtoD MB | "
          "real DtoH MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, x in k.iterrows():
        if x["faults"] == 0 and not records[i] > 0 and not real_h[i] > 0 and not real_d[i] > 0:
            continue
        print(f"| {x['kernel_id']} {x['name'].split('(')[0].split('<')[0][:48]} | {x['faults']:,} | "
              f"{x['fault_batches']:,} | {x['faults'] / max(x['fault_batches'], 1):.0f} | "
              f"{x['htod_bytes'] / 1e6:.0f} | {x['dtoh_bytes_evict'] / 1e6:.0f} | "
              f"{x['evicted_chunks']:,} | {x['stall_ns'] / 1e6:.1f} | {x['sim_ns'] / 1e3:,.1f} | "
              f"{_cell(real_us[i], '{:,.1f}')} | {_cell(records[i], '{:,.0f}')} | "
              f"{_cell(real_h[i], '{:,.0f}')} | {_cell(real_d[i], '{:,.0f}')} |")
    print(f"real {r['real_s']:.3f} s, replayed {res.kernels['sim_ns'].sum() / 1e9:.3f} s "
          f"({model.name}, capacity {int(r['capacity_bytes']):,} bytes)")
    return 0


def _kernel_record(workload: str, factor: float, suffix: str) -> dict:
    """The per-kernel columns of the real run's record (results/runs/WORKLOAD__fF{suffix}),
    read once; {} where there is none."""
    p = fit.RESULTS / "runs" / f"{workload}__f{factor:g}{suffix}.json.gz"
    return (json.load(gzip.open(p)).get("kernels") or {}) if p.exists() else {}


def _column(kernels: dict, column: str, n: int, scale: float) -> list[float]:
    """Per kernel, `column` of a record's kernels times `scale`; NaN where the record lacks
    it or has another number of kernels."""
    v = kernels.get(column) or []
    return [float(x) * scale for x in v] if len(v) == n else [float("nan")] * n


def _cell(v: float, fmt: str) -> str:
    return "-" if v != v else fmt.format(v)


if __name__ == "__main__":
    sys.exit(main())
