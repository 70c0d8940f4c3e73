"""The study's simulated side: `uvmsim sweep` of the study traces.

    python3 benchmarks/study/simulate.py [--jobs N] [--executor process|dask|serial]
        [--scheduler ADDR] [--factors 1,1.25,...] [--traces alexnet_on,...]
        [--models contract,h200,...] [--prefetch density,none]

Replays every trace in benchmarks/study/traces/ (regenerate them with run_device.sh) at the
factors × prefetch policies × model presets below, with iterations marked by models.py's
``spin_kernel`` (so ``iter_*`` columns hold the last training step, like the real ``iter_s``).
Cells go to results/sim/ (a resumable dataset, git-ignored); the table to results/sim_runs.csv.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "src"))

from uvmsim.sweep import sweep  # noqa: E402

FACTORS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0)
PREFETCH = ("density", "none")
MODELS = ("contract", "h200")
COLUMNS = ["trace", "model", "prefetch", "evict", "oversub", "faults", "faults_read",
           "faults_write", "fault_batches", "htod_bytes", "htod_bytes_demand",
           "htod_bytes_prefetch", "htod_bytes_memcpy", "evicted_chunks", "dtoh_bytes_evict",
           "capacity_chunks", "peak_blocks", "sim_time_ns", "compute_ns", "slowdown",
           "segment_kernels", "iter_faults", "iter_faults_read", "iter_faults_write",
           "iter_htod_bytes", "iter_evicted_chunks", "iter_dtoh_bytes_evict",
           "iter_compute_ns", "iter_sim_ns", "iter_slowdown", "cell_id", "trace_id"]


def study_traces(names: str = "") -> dict[str, str]:
    """{name: path} of the study traces in benchmarks/study/traces/ (`names`: comma-separated
    subset; empty: all)."""
    want = {t for t in names.split(",") if t}
    traces = {p.name.removesuffix(".uvmtrace"): str(p)
              for p in sorted((HERE / "traces").glob("*.uvmtrace"))
              if not want or p.name.removesuffix(".uvmtrace") in want}
    if not traces:
        raise SystemExit("no traces in benchmarks/study/traces/: run run_device.sh first")
    return traces


def study_sweep(traces: dict[str, str], factors=FACTORS, models=MODELS, prefetch=PREFETCH,
                **kw):
    """The study's grid (factors x prefetch x lru2m x models, iterations marked by
    ``spin_kernel``) over `traces`; `kw` goes to uvmsim.sweep (jobs, executor, out, ...)."""
    return sweep(traces, oversub=[float(f) for f in factors], prefetch=list(prefetch),
                 evict=("lru2m",), model=list(models), segment="spin_kernel", **kw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="", help="comma-separated names (default: all)")
    ap.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    ap.add_argument("--models", default=",".join(MODELS),
                    help="model presets (default: %(default)s; `uvmsim models` lists them)")
    ap.add_argument("--prefetch", default=",".join(PREFETCH),
                    help="prefetch policies (default: %(default)s)")
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--executor", default="process")
    ap.add_argument("--scheduler")
    ap.add_argument("--out", default=str(HERE / "results" / "sim"))
    ap.add_argument("--table", default=str(HERE / "results" / "sim_runs.csv"))
    a = ap.parse_args()
    traces = study_traces(a.traces)
    t0 = time.time()
    df = study_sweep(traces, a.factors.split(","), models=a.models.split(","),
                     prefetch=a.prefetch.split(","), jobs=a.jobs, executor=a.executor,
                     scheduler=a.scheduler, out=a.out)
    took = time.time() - t0
    if a.table:
        df[[c for c in COLUMNS if c in df.columns]].to_csv(a.table, index=False)
    print(f"{len(df)} cells ({df.attrs['computed']} computed, {df.attrs['reused']} reused) "
          f"in {took:.1f} s wall, executor {a.executor}, jobs {a.jobs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
