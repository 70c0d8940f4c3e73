"""Child process of the benchmarks: load + replay one trace, report JSON on stdout.

Kept separate so it can be pinned to one core and so peak memory covers only loading and
replaying, not building the trace; a warm-up first compiles (or loads from the disk caches)
the loader and the engine, and the peak (VmHWM) is reset after it.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time


def status_kib(key: str) -> int:
    """A /proc/self/status field in KiB (Linux); 0 elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS (Linux: 5 to clear_refs), so the peaks
    measured next exclude the warm-up's compile transients; False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def warm_up(a) -> None:
    """Compile (or load from the disk caches) everything the measured load and replay run:
    the loader's compiled helpers, through a tiny trace read from Parquet, and the engine
    for the policy pair, on the same tiny trace."""
    import tempfile
    import uvmsim
    from uvmsim.trace import synth
    with tempfile.TemporaryDirectory(prefix="uvmsim-warm-") as d:
        path = os.path.join(d, "tiny.uvmtrace")
        synth.write("sequential", path, footprint_bytes=4 << 20, kernels=1)
        uvmsim.simulate(uvmsim.load_trace(path), oversub=a.oversub, prefetch=a.prefetch,
                        evict=a.evict)


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
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm_up(a)
    t_compile = time.perf_counter() - t0
    # peaks from VmHWM, reset after the warm-up; where it cannot be reset, ru_maxrss, whose
    # peak may then be the warm-up's (a cold compile's transients reach ~1 GiB)
    if reset_peak():
        def peak_kib_now():
            return status_kib("VmHWM")
    else:
        def peak_kib_now():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    base_kib = status_kib("VmRSS")
    t0 = time.perf_counter()
    tr = uvmsim.load_trace(a.trace)
    t_load = time.perf_counter() - t0
    load_peak_kib = peak_kib_now()
    t0 = time.perf_counter()
    r = uvmsim.simulate(tr, oversub=a.oversub, prefetch=a.prefetch, evict=a.evict,
                        keep_state=a.evict_cost)
    t_replay = time.perf_counter() - t0
    peak_kib = peak_kib_now()
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
    from uvmsim.engine.state import EngineState, engine_trace
    from uvmsim.policies import get_evict, get_prefetch

    pf, ev = get_prefetch(a.prefetch), get_evict(a.evict)
    eng = engine_for(pf, ev)
    evict_one = eng.evict_one

    @njit
    def drain(est, S, T):
        n = 0
        while S.pool[0].n_free < S.chunk_block.size:
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
