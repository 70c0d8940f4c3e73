"""Wall time of the study's full simulated sweep, per executor and number of workers
(docs/performance.md, "Sweeps").

    python benchmarks/sweep_scaling.py [--executor dask|process|serial] [--workers 1,2]
        [--traces alexnet_on,...] [--factors 1,1.5,...] [--deadline-s S] [--csv FILE]

The sweep is benchmarks/study/simulate.py's grid (factors x prefetch x model presets, lru2m,
iterations marked by ``spin_kernel``) over the study traces in benchmarks/study/traces/
(recorded by benchmarks/study/run_device.sh; git-ignored). Before the timed runs every engine
variant of the grid is compiled into the on-disk cache (one cell of the smallest trace per
prefetch policy), so each timed run starts as a user's second sweep does: engines warm, each
worker reading the traces it is given. Every timed run computes every cell (no dataset, nothing
reused). A dask run starts its own ``LocalCluster`` (worker processes of one thread); starting it
is timed apart from the sweep. The runs must give identical tables (checked). One line per run is
printed, and appended to --csv with the machine's name; --table writes the first run's table
(simulate.py's results/sim_runs.csv).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "src"))
sys.path.insert(0, str(HERE / "study"))

import pandas as pd  # noqa: E402

from simulate import COLUMNS, FACTORS, study_sweep, study_traces  # noqa: E402

#: columns two runs of the same cells must agree on
CHECK = ["cell_id", "faults", "faults_read", "htod_bytes", "evicted_chunks", "dtoh_bytes_evict",
         "sim_time_ns", "iter_sim_ns"]
CSV_COLUMNS = ["date", "machine", "load_avg_1m", "executor", "workers", "traces", "cells",
               "start_s", "sweep_s", "speedup"]


def machine() -> str:
    name = ""
    try:
        with open("/proc/cpuinfo") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f
                         if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{name or 'unknown CPU'}, {os.cpu_count()} logical CPUs"


def warm(traces: dict[str, str]) -> float:
    """Compile the grid's engine variants into the disk cache; returns the seconds taken."""
    t0 = time.perf_counter()
    small = min(traces, key=lambda k: sum(p.stat().st_size for p in Path(traces[k]).iterdir()))
    study_sweep({small: traces[small]}, (1.0,), executor="serial", progress=False)
    return time.perf_counter() - t0


def timed(traces, factors, executor: str, n: int, progress: bool):
    """(table, cluster start seconds, sweep seconds) of one full run."""
    if executor != "dask":
        t0 = time.perf_counter()
        df = study_sweep(traces, factors, executor=executor, jobs=n, progress=progress)
        return df, 0.0, time.perf_counter() - t0
    from dask.distributed import Client, LocalCluster
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    t1 = time.perf_counter()
    try:
        df = study_sweep(traces, factors, executor="dask", client=client, progress=progress)
        t2 = time.perf_counter()
    finally:
        client.close()
        cluster.close()
    return df, t1 - t0, t2 - t1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executor", default="dask", choices=("dask", "process", "serial"))
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts, in order")
    ap.add_argument("--traces", default="", help="comma-separated names (default: all)")
    ap.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    ap.add_argument("--deadline-s", type=float, default=0.0,
                    help="skip a run that would end after this many seconds (estimated from "
                         "the previous run); 0: no deadline")
    ap.add_argument("--csv", help="append one row per run to this file")
    ap.add_argument("--table", help="write the first run's table here (as simulate.py does)")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args()
    t_start = time.perf_counter()
    traces = study_traces(a.traces)
    factors = a.factors.split(",")
    workers = [int(w) for w in a.workers.split(",") if w]
    if not workers or min(workers) < 1:
        raise SystemExit(f"--workers {a.workers!r}: positive worker counts expected")
    where = machine()
    load = os.getloadavg()[0]
    print(f"machine: {where}; load average (1 min) {load:.2f}; {len(traces)} traces: "
          f"{', '.join(traces)}")
    print(f"compiling the engine variants into the disk cache: {warm(traces):.1f} s")
    runs, ref = [], None
    for n in workers:
        if a.deadline_s and runs:
            prev_n, prev_s = runs[-1]["workers"], runs[-1]["sweep_s"]
            est = prev_s * max(1.0, prev_n / n) * 1.3 + 15
            if time.perf_counter() - t_start + est > a.deadline_s:
                print(f"{a.executor} x{n}: skipped (would end after --deadline-s; "
                      f"estimated {est:.0f} s)")
                continue
        df, start_s, sweep_s = timed(traces, factors, a.executor, n, not a.no_progress)
        table = df[CHECK].sort_values("cell_id").reset_index(drop=True)
        if ref is None:
            ref = table
            if a.table:
                df[[c for c in COLUMNS if c in df.columns]].to_csv(a.table, index=False)
        else:
            pd.testing.assert_frame_equal(table, ref)
        runs.append({"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": where,
                     "load_avg_1m": f"{os.getloadavg()[0]:.2f}", "executor": a.executor,
                     "workers": n, "traces": len(traces), "cells": len(df),
                     "start_s": round(start_s, 2), "sweep_s": round(sweep_s, 2)})
        print(f"{a.executor} x{n}: {len(df)} cells in {sweep_s:.1f} s"
              + (f" (cluster start {start_s:.1f} s)" if a.executor == "dask" else ""),
              flush=True)
    one = next((r["sweep_s"] for r in runs if r["workers"] == 1), None)
    for r in runs:
        r["speedup"] = "" if one is None else round(one / r["sweep_s"], 2)
    if one is not None:
        print("speed-up over 1 worker: " + ", ".join(f"x{r['workers']} {r['speedup']}"
                                                    for r in runs))
    if len(runs) > 1:
        print("all runs gave the same table")
    if a.csv and runs:
        new = not Path(a.csv).exists()
        with open(a.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            if new:
                w.writeheader()
            w.writerows(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
