"""Block-page events per second and ns per fault of the progress front-end (block_progress).

    PYTHONPATH=src python benchmarks/progress_throughput.py [--mib 1024] [--reps 3]

A block-page event is one page of one stream row passed by its thread block (the sum over
a kernel's stream rows of the access pages each stands for); retries after a stall are
extra work not counted, so the rate is a lower bound. The trace is synth grid_stride_fill
(an H100's 132 SMs x 8 blocks, 1,056 of 2,048 blocks resident) and block_slice_fill of
`--mib` MiB; each is replayed at factors 1, 1.5 and 3 with density + lru2m, best of
`--reps` after a warm-up that compiles the engine, pinned to one core. `prepare` is the
Python part of a replay (checks, state, the front-end's arrays); `replay` the compiled
event loop; the rates are of replay.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import uvmsim
from uvmsim.engine.build import engine_for
from uvmsim.engine.state import engine_trace
from uvmsim.simulate import frontend_of, prepare
from uvmsim.trace import synth

MiB = 1 << 20


def events(t) -> int:
    from uvmsim.engine.blocks import progress_arrays
    from uvmsim.trace.streams import launch_arrays
    a = progress_arrays(t.arrays, t.streams, launch_arrays(t))
    live = np.repeat(a["fe_slots"] > 0, np.diff(a["fe_bstart"]))
    rows = np.repeat(live, np.diff(a["fe_rstart"]))
    return int((a["fe_rhi"] - a["fe_rlo"])[rows].sum())


def once(t, f: float) -> tuple[float, float, dict]:
    t0 = time.perf_counter()
    run = prepare(t, oversub=f, block_progress=True)
    t1 = time.perf_counter()
    eng = engine_for(run.pf, run.ev, frontend=frontend_of(run.model))
    eng.replay(run.pst, run.est, run.state, engine_trace(run.arrays), run.fault_batch_size)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, run.result().summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"# {platform.processor() or platform.machine()}, one core; density + lru2m")
    print("| trace | factor | block-page events | faults | prepare s | replay s | "
          "M events/s | ns/fault |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in ("grid_stride_fill", "block_slice_fill"):
        t = synth.make(kind, footprint_bytes=a.mib * MiB, grid=2048, block=256,
                       sm_count=132, max_blocks_per_sm=8)
        n = events(t)
        once(t, 1.0)  # compile
        for f in (1.0, 1.5, 3.0):
            best = min((once(t, f) for _ in range(a.reps)), key=lambda x: x[1])
            prep, rep, s = best
            nf = s["faults"]
            print(f"| {kind} {a.mib} MiB | {f} | {n:,} | {nf:,} | {prep:.3f} | {rep:.3f} | "
                  f"{n / rep / 1e6:.1f} | {rep * 1e9 / max(nf, 1):,.0f} |")


if __name__ == "__main__":
    main()
