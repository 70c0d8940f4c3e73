"""Replay v1.2 traces at several oversubscription factors with and without block_progress,
into one small CSV (for comparing with real runs; docs/model.md, "Thread blocks that stall
on faults").

    PYTHONPATH=src python benchmarks/progress_factors.py T1.uvmtrace [T2.uvmtrace ...] \\
        --factors 1 1.25 1.5 2 3 --model h200 --out progress_factors.csv

One row per (trace, factor, block_progress), factor 1 always included: the counts, the simulated time, the slowdown
over the same mode's factor-1 time, the kernels that had a stream, and the replay's wall
time. Needs no GPU. `compare()` is the same as a function.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import uvmsim

COLUMNS = ("trace", "factor", "block_progress", "faults", "fault_batches", "evicted_chunks",
           "htod_bytes", "sim_time_ns", "slowdown", "stream_kernels", "kernels", "wall_s")


def compare(traces, factors=(1.0, 1.25, 1.5, 2.0, 3.0), *, model: str = "h200",
            **kwargs) -> pd.DataFrame:
    """The table for trace paths (or Traces) `traces`; `kwargs` go to uvmsim.simulate."""
    rows = []
    for p in traces:
        t = p if isinstance(p, uvmsim.Trace) else uvmsim.load_trace(p)
        name = Path(str(t.path or p)).name.removesuffix(".uvmtrace")
        st = t.streams
        n_stream = int((st.k_unit != 0).sum()) if st is not None else 0
        for on in (False, True):
            base = None
            for f in sorted({1.0, *map(float, factors)}):
                t0 = time.perf_counter()
                r = uvmsim.simulate(t, oversub=f, model=model, block_progress=on, **kwargs)
                wall = time.perf_counter() - t0
                s = r.summary
                if f == 1.0:
                    base = s["sim_time_ns"]
                rows.append(dict(trace=name, factor=f, block_progress=on, faults=s["faults"],
                                 fault_batches=s["fault_batches"],
                                 evicted_chunks=s["evicted_chunks"], htod_bytes=s["htod_bytes"],
                                 sim_time_ns=s["sim_time_ns"],
                                 slowdown=s["sim_time_ns"] / base if base else float("nan"),
                                 stream_kernels=n_stream, kernels=t.n_kernels, wall_s=wall))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--factors", type=float, nargs="+", default=[1.0, 1.25, 1.5, 2.0, 3.0])
    p.add_argument("--model", default="h200")
    p.add_argument("--out", default="progress_factors.csv")
    a = p.parse_args()
    df = compare(a.traces, a.factors, model=a.model)
    df.to_csv(a.out, index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(df.to_string(index=False))
    print(f"table: {a.out}")


if __name__ == "__main__":
    main()
