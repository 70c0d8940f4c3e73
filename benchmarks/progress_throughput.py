"""Block-page events per second and ns per fault of the progress front-end (block_progress).

    PYTHONPATH=src python benchmarks/progress_throughput.py [--mib 1024] [--reps 3]
    PYTHONPATH=src python benchmarks/progress_throughput.py --variants [--mib 256]
    PYTHONPATH=src python benchmarks/progress_throughput.py --heap [--mib 256]
    PYTHONPATH=src python benchmarks/progress_throughput.py --cpu [--mib 256]

A block-page event is one page of one stream row passed by its thread block (the sum over
a kernel's stream rows of the access pages each stands for); retries after a stall are
extra work not counted, so the rate is a lower bound. The trace is synth grid_stride_fill
(an H100's 132 SMs x 8 blocks, 1,056 of 2,048 blocks resident) and block_slice_fill of
`--mib` MiB; each is replayed at factors 1, 1.5 and 3 with density + lru2m, best of
`--reps` after a warm-up that compiles the engine, pinned to one core. `prepare` is the
Python part of a replay (checks, state, the front-end's arrays); `replay` the compiled
event loop; the rates are of replay. `--variants`: the grid-stride fill at factor 1 replayed
with one setting changed at a time (what the replay time follows: batches, the eviction
policy's hits, the resident blocks). `--heap`: the front-end's own cost per event without
faults, against the resident blocks (the depth of its tournament of running blocks): the
grid-stride fill launched twice at factor 1, whose second launch finds every page resident,
less the fill launched once; and the same trace replayed as page sets. `--cpu`: the
times are the thread's CPU time, not wall time (a shared machine's other jobs then cost
the replay less than when it waits for the core; cache sharing still shows).
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
CLOCK = time.perf_counter  # --cpu: time.thread_time


def events(t) -> int:
    from uvmsim.engine.blocks import progress_arrays
    from uvmsim.trace.streams import launch_arrays
    a = progress_arrays(t.arrays, t.streams, launch_arrays(t))
    live = np.repeat(a["fe_slots"] > 0, np.diff(a["fe_bstart"]))
    rows = np.repeat(live, np.diff(a["fe_rstart"]))
    return int((a["fe_rhi"] - a["fe_rlo"])[rows].sum())


def once(t, f: float, **settings) -> tuple[float, float, dict]:
    t0 = CLOCK()
    run = prepare(t, oversub=f, block_progress=True, **settings)
    t1 = CLOCK()
    eng = engine_for(run.pf, run.ev, frontend=frontend_of(run.model))
    eng.replay(run.pst, run.est, run.state, engine_trace(run.arrays), run.fault_batch_size)
    t2 = CLOCK()
    return t1 - t0, t2 - t1, run.result().summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--variants", action="store_true",
                   help="the grid-stride fill at factor 1 with one setting changed at a time")
    p.add_argument("--heap", action="store_true",
                   help="a fault-free launch's cost per event against the resident blocks")
    p.add_argument("--cpu", action="store_true",
                   help="time with the thread's CPU time (time.thread_time), not wall time")
    a = p.parse_args()
    if a.cpu:
        global CLOCK
        CLOCK = time.thread_time
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if a.variants:
        variants(a)
        return
    if a.heap:
        heap(a)
        return
    print(f"# {platform.processor() or platform.machine()}, one core; density + lru2m"
          f"{'; CPU time' if a.cpu else ''}")
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


def variants(a) -> None:
    print(f"# {platform.processor() or platform.machine()}, one core; grid_stride_fill "
          f"{a.mib} MiB, factor 1, best of {a.reps}")
    print("| variant | resident slots | block-page events | faults | batches | replay s |")
    print("|---|---|---|---|---|---|")
    # (name, SMs, settings): 8 resident blocks per SM, so 132 SMs hold 1,056 of the 2,048
    cases = [("density + lru2m", 132, {}),
             ("fault_latency_ns 50 us", 132, {"fault_latency_ns": 50000}),
             ("prefetch none", 132, {"prefetch": "none"}),
             ("evict fifo2m", 132, {"evict": "fifo2m"}),
             ("store_ahead 16, fault_order age", 132, {"store_ahead": 16, "fault_order": "age"}),
             ("16 SMs", 16, {})]
    for name, sms, kw in cases:
        t = synth.make("grid_stride_fill", footprint_bytes=a.mib * MiB, grid=2048, block=256,
                       sm_count=sms, max_blocks_per_sm=8)
        once(t, 1.0, **kw)  # compile
        _, rep, s = min((once(t, 1.0, **kw) for _ in range(a.reps)), key=lambda x: x[1])
        print(f"| {name} | {min(sms * 8, 2048):,} | {events(t):,} | {s['faults']:,} | "
              f"{s['fault_batches']:,} | {rep:.3f} |")


def heap(a) -> None:
    print(f"# {platform.processor() or platform.machine()}, one core; grid_stride_fill "
          f"{a.mib} MiB, factor 1, best of {a.reps}")
    print("| resident slots | block-page events (second launch) | faults | "
          "second launch s | ns/event | page sets, both launches s |")
    print("|---|---|---|---|---|---|")
    for sms in (1, 16, 132):
        s = {}
        for nk in (1, 2):
            t = synth.make("grid_stride_fill", footprint_bytes=a.mib * MiB, grid=2048,
                           block=256, sm_count=sms, max_blocks_per_sm=8, kernels=nk)
            once(t, 1.0)  # compile
            s[nk] = min((once(t, 1.0) for _ in range(a.reps)), key=lambda x: x[1])
        ev = events(t) // 2
        second = s[2][1] - s[1][1]
        assert s[2][2]["faults"] == s[1][2]["faults"]  # the second launch faults on nothing
        ps = min(_page_sets(t) for _ in range(a.reps))
        print(f"| {min(sms * 8, 2048):,} | {ev:,} | 0 | {second:.4f} | "
              f"{second * 1e9 / ev:.0f} | {ps:.4f} |")


def _page_sets(t) -> float:
    run = prepare(t, oversub=1.0)
    eng = engine_for(run.pf, run.ev, frontend=frontend_of(run.model))
    t0 = CLOCK()
    eng.replay(run.pst, run.est, run.state, engine_trace(run.arrays), run.fault_batch_size)
    return CLOCK() - t0


if __name__ == "__main__":
    main()
