"""Child process of the benchmarks: load + replay one trace, report JSON on stdout.

Kept separate so peak memory (ru_maxrss) covers only loading and replaying, not building
the trace, and so it can be pinned to one core.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--oversub", type=float, default=1.5)
    ap.add_argument("--prefetch", default="density")
    ap.add_argument("--evict", default="lru2m")
    ap.add_argument("--one-core", action="store_true")
    ap.add_argument("--evict-cost", action="store_true",
                    help="also time evicting every chunk of the final state (evict_cost)")
    a = ap.parse_args()
    if a.one_core and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    t0 = time.perf_counter()
    import uvmsim
    from uvmsim.trace import synth
    t_import = time.perf_counter() - t0
    # compile (or load from the disk cache) on a tiny trace of the same types
    tiny = synth.make("sequential", footprint_bytes=4 << 20, kernels=1)
    t0 = time.perf_counter()
    uvmsim.simulate(tiny, oversub=a.oversub, prefetch=a.prefetch, evict=a.evict)
    t_compile = time.perf_counter() - t0
    base_kib = rss_kib()
    t0 = time.perf_counter()
    tr = uvmsim.load_trace(a.trace)
    t_load = time.perf_counter() - t0
    load_peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    r = uvmsim.simulate(tr, oversub=a.oversub, prefetch=a.prefetch, evict=a.evict,
                        keep_state=a.evict_cost)
    t_replay = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra = {}
    if a.evict_cost:
        extra = evict_cost(tr, r, a)
    rows = tr.n_accesses
    print(json.dumps({
        "rows": rows, "kernels": tr.n_kernels, "peak_blocks": tr.peak_blocks,
        "import_s": t_import, "compile_s": t_compile, "load_s": t_load, "replay_s": t_replay,
        "rows_per_s": rows / t_replay, "peak_rss_mib": peak_kib / 1024,
        "baseline_rss_mib": base_kib / 1024,
        "bytes_per_row": (peak_kib - base_kib) * 1024 / rows,
        "load_bytes_per_row": (load_peak_kib - base_kib) * 1024 / rows,
        "faults": r.summary["faults"], "evicted_chunks": r.summary["evicted_chunks"],
        "prefetch": a.prefetch, "evict": a.evict, "oversub": a.oversub, **extra,
    }))


def _copy(x):
    """A deep copy of engine or policy state: arrays copied, named state rebuilt with its
    own type (Numba types a namedtuple by its class, so a plain tuple would not do)."""
    import numpy as np
    if isinstance(x, np.ndarray):
        return np.copy(x)
    if isinstance(x, tuple):
        return type(x)(*(_copy(v) for v in x)) if hasattr(x, "_fields") else tuple(_copy(v) for v in x)
    return x


def evict_cost(tr, r, a, repeat: int = 20) -> dict:
    """Time the engine's own evict_one on the state the replay ended in: evict every chunk
    (the policy picks each victim, its resident pages are copied back run by run, the chunk
    is released), `repeat` times from copies of that state; seconds per evicted chunk."""
    import numpy as np
    from numba import njit

    from uvmsim.engine.build import engine_for
    from uvmsim.engine.arrays import engine_arrays
    from uvmsim.engine.state import EngineState, S_NFREE, engine_trace
    from uvmsim.policies import get_evict, get_prefetch

    pf, ev = get_prefetch(a.prefetch), get_evict(a.evict)
    eng = engine_for(pf, ev)
    evict_one = eng.evict_one

    @njit
    def drain(est, S, T):
        n = 0
        while S.scal[S_NFREE] < S.chunk_block.size:
            evict_one(est, S, T, 0, 0)
            n += 1
        return n

    S0 = r.state
    T = engine_trace(engine_arrays(tr))
    # the policy's state at the end of the replay is not kept: rebuild it by replaying
    # the same trace again with the same arguments (deterministic), keeping it this time
    from uvmsim.simulate import prepare
    run = prepare(tr, oversub=a.oversub, prefetch=pf, evict=ev)
    eng.replay(run.pst, run.est, run.state, T, run.fault_batch_size)
    assert (run.state.counts == S0.counts).all()
    fields = EngineState._fields
    best = float("inf")
    chunks = 0
    resident = int((run.state.b_nres).sum())
    for i in range(repeat + 1):
        S = EngineState(*(_copy(run.state._arrays[f]) for f in fields))
        est = _copy(run.est)
        t0 = time.perf_counter()
        chunks = drain(est, S, T)
        dt = time.perf_counter() - t0
        if i:  # the first call compiles drain
            best = min(best, dt)
    return {"evict_chunks_drained": chunks, "evict_pages_drained": resident,
            "evict_s_per_chunk": best / max(chunks, 1)}


if __name__ == "__main__":
    sys.exit(main())
