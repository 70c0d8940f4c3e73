"""Streamed against in-memory replay of a 20 M-row trace: time and memory.

    python benchmarks/stream_replay.py
    python benchmarks/stream_replay.py --repeat 3 --batch-rows 65536

Uses the trace of benchmarks/load_throughput.py (20.48 M access rows, 1 Mi-row row groups,
zstd; written once under benchmarks/out/). Each mode runs in a fresh process pinned to one
core: after a warm-up replay of a small trace (the engine comes from the disk cache), the
peak RSS is reset, then the trace is loaded and replayed with density/lru2m at factor
`--oversub` (default 1: the trace fits, so the time is mostly reading and replaying rows, not
servicing faults), `--repeat` times. Printed per mode: load + replay wall time (best), rows/s, and the peak RSS
growth over the warm baseline (per row and in MiB). Streamed, the counts must equal the
in-memory replay's (checked). Figures: docs/performance.md, "Traces larger than memory".
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

CHILD = r"""
import json, os, sys, time
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
sys.path.insert(0, os.path.join(sys.argv[2], "src"))
import uvmsim
from uvmsim import load_trace

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

kw = dict(oversub=float(sys.argv[7]), prefetch="density", evict="lru2m")
stream, batch = sys.argv[4] == "stream", int(sys.argv[5])
uvmsim.simulate(load_trace(sys.argv[3], stream=stream), **kw)  # warm: engine from the cache
with open("/proc/self/clear_refs", "w") as f:  # Linux: reset the peak RSS (VmHWM)
    f.write("5")
base = status("VmRSS")
best = None
for _ in range(int(sys.argv[6])):
    t0 = time.perf_counter()
    tr = load_trace(sys.argv[1], stream=stream, batch_rows=batch)
    r = uvmsim.simulate(tr, **kw)
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
    del tr
print(json.dumps(dict(s=best, summary=r.summary, growth=status("VmHWM") - base)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--oversub", type=float, default=1.0)
    ap.add_argument("--batch-rows", type=int, default=1 << 16,
                    help="rows decoded at a time when streaming (default 65536)")
    a = ap.parse_args()
    from load_throughput import LAYOUTS, write

    from uvmsim.trace import load_trace, synth
    out = HERE / "out"
    small = out / "load_warmup.uvmtrace"
    if not small.exists():
        synth.write("random", small, footprint_bytes=64 << 20, kernels=2, pages_per_kernel=64)
    path = out / "load_zstd-1Mi.uvmtrace"
    if not path.exists():
        write(path, LAYOUTS["zstd-1Mi"])
    rows = load_trace(path, stream=True).n_accesses
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    got = {}
    for mode in ("memory", "stream"):
        res = json.loads(subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(ROOT), str(small), mode,
             str(a.batch_rows), str(a.repeat), str(a.oversub)],
            env=env, check=True, capture_output=True, text=True).stdout.strip()
            .splitlines()[-1])
        got[mode] = res
        print(f"[{mode}, factor {a.oversub:g}] {rows:,} rows: load + replay {res['s']:.2f} s (best of {a.repeat}, one "
              f"core) = {rows / res['s'] / 1e6:.1f} M rows/s; peak RSS growth "
              f"{res['growth'] / rows:.2f} bytes/row ({res['growth'] / 2**20:.0f} MiB)"
              + (f", batches of {a.batch_rows:,} rows" if mode == "stream" else ""),
              flush=True)
    same = got["memory"]["summary"] == got["stream"]["summary"]
    print(f"streamed counts equal the in-memory replay's: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
