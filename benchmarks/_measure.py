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
    r = uvmsim.simulate(tr, oversub=a.oversub, prefetch=a.prefetch, evict=a.evict)
    t_replay = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = tr.n_accesses
    print(json.dumps({
        "rows": rows, "kernels": tr.n_kernels, "peak_blocks": tr.peak_blocks,
        "import_s": t_import, "compile_s": t_compile, "load_s": t_load, "replay_s": t_replay,
        "rows_per_s": rows / t_replay, "peak_rss_mib": peak_kib / 1024,
        "baseline_rss_mib": base_kib / 1024,
        "bytes_per_row": (peak_kib - base_kib) * 1024 / rows,
        "load_bytes_per_row": (load_peak_kib - base_kib) * 1024 / rows,
        "faults": r.summary["faults"], "evicted_chunks": r.summary["evicted_chunks"],
        "prefetch": a.prefetch, "evict": a.evict, "oversub": a.oversub,
    }))


if __name__ == "__main__":
    sys.exit(main())
