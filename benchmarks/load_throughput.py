"""Load time of a 20 M-row trace, whatever its Parquet layout.

    python benchmarks/load_throughput.py             # writes the traces once, then times
    python benchmarks/load_throughput.py --repeat 5

Writes (once, under benchmarks/out/) the fault-heavy trace shape of benchmarks/
replay_throughput.py: 8 managed allocations of 256 MiB, 200 kernels of 102,400 rows each,
half touching a sequential run of pages and half a random page set (20.48 M access rows), in
two Parquet layouts: 1 Mi-row row groups with zstd, and 64 Ki-row row groups with snappy.
Each is then loaded by `load_trace` in a fresh process pinned to one core; printed: load time
(best of --repeat), bytes per row on disk and in memory (the Trace's arrays), and the peak
RSS growth per row over the process after its warm-up load (Linux). Goal: <= 2 s on one core for every layout. Figures: docs/performance.md, "Loading".
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

N_ALLOC, ALLOC_BYTES, N_KERNELS, ROWS_PER_KERNEL = 8, 256 << 20, 200, 102_400
LAYOUTS = {
    "zstd-1Mi": dict(compression="zstd", row_group_size=1 << 20),
    "snappy-64Ki": dict(compression="snappy", row_group_size=1 << 16),
}


def write(path: Path, layout: dict) -> Path:
    """Write the trace table by table, kernel by kernel, without holding it in memory."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from uvmsim.trace.format import ACCESSES, arrow_schema
    from uvmsim.trace.io import write_trace
    rng = np.random.default_rng(0)
    base0 = 0x7F0000000000
    bases = [base0 + i * (ALLOC_BYTES + (2 << 20)) for i in range(N_ALLOC)]
    alloc = pd.DataFrame(dict(alloc_id=np.arange(N_ALLOC, dtype=np.uint32),
                              base=np.array(bases, np.uint64),
                              size=np.full(N_ALLOC, ALLOC_BYTES, np.uint64),
                              kind="managed", name=None))
    ev = [dict(op="alloc", alloc_id=i) for i in range(N_ALLOC)]
    ev += [dict(op="kernel", kernel_id=k) for k in range(N_KERNELS)]
    events = pd.DataFrame(ev).assign(seq=np.arange(len(ev), dtype=np.uint64))
    for c in ("alloc_id", "kernel_id"):
        events[c] = events[c].astype("UInt32")
    for c in ("addr", "size"):
        events[c] = pd.array([None] * len(ev), dtype="UInt64")
    for c in ("stream", "t_start_ns", "t_end_ns"):
        events[c] = pd.array([None] * len(ev), dtype="Int64")
    events["arg"] = pd.array([None] * len(ev), dtype="string")
    kernels = pd.DataFrame(dict(kernel_id=np.arange(N_KERNELS, dtype=np.uint32),
                                name=[f"k{k}" for k in range(N_KERNELS)],
                                duration_ns=np.full(N_KERNELS, 100_000, np.int64),
                                grid=None, block=None))
    empty = pa.table({n: pa.array([], t) for n, t in
                      zip(arrow_schema(ACCESSES).names, arrow_schema(ACCESSES).types)})
    write_trace(path, allocations=alloc, events=events, kernels=kernels, accesses=empty,
                source={"generator": "benchmarks/load_throughput.py"}, overwrite=True)
    pages_per_alloc = ALLOC_BYTES >> 12
    all_pages = np.concatenate([(b >> 12) + np.arange(pages_per_alloc, dtype=np.int64)
                                for b in bases])
    pending: list[pa.Table] = []
    with pq.ParquetWriter(path / ACCESSES, arrow_schema(ACCESSES),
                          compression=layout["compression"]) as w:
        def flush(final: bool) -> None:
            # row groups of exactly row_group_size rows (ParquetWriter cuts each
            # write_table call on its own, so kernels are gathered first)
            t = pa.concat_tables(pending)
            step = layout["row_group_size"]
            cut = t.num_rows if final else t.num_rows - t.num_rows % step
            if cut:
                w.write_table(t.slice(0, cut), row_group_size=step)
            pending[:] = [t.slice(cut)] if cut < t.num_rows else []

        for k in range(N_KERNELS):
            if k % 2 == 0:  # a sequential run of pages (across allocation boundaries)
                start = rng.integers(all_pages.size - ROWS_PER_KERNEL)
                page = all_pages[start:start + ROWS_PER_KERNEL]
            else:  # a random page set, touched in random order
                page = rng.choice(all_pages, ROWS_PER_KERNEL, replace=False)
            n = page.size
            t = pa.table(dict(kernel_id=pa.array(np.full(n, k, np.uint32)),
                              page=pa.array(page.astype(np.uint64)),
                              flags=pa.array(rng.integers(1, 4, n).astype(np.uint8)),
                              count=pa.array(rng.integers(1, 9, n).astype(np.uint32)),
                              order=pa.array(np.arange(n, dtype=np.uint32))),
                         schema=arrow_schema(ACCESSES))
            pending.append(t)
            if sum(p.num_rows for p in pending) >= layout["row_group_size"]:
                flush(False)
        flush(True)
    return path


CHILD = r"""
import json, os, sys, time
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
sys.path[:0] = [os.path.join(sys.argv[2], "src"), os.path.join(sys.argv[2], "benchmarks")]
from uvmsim import load_trace
from _measure import reset_peak, status_kib
load_trace(sys.argv[3])  # warm: compiled passes from the cache, files in the page cache
if not reset_peak():  # the peak (VmHWM) restarts here, after the warm-up's compile
    sys.exit("needs Linux /proc/self/clear_refs to reset the peak RSS")
base = status_kib("VmRSS") * 1024
best = tr = None
for _ in range(int(sys.argv[4])):
    tr = None  # one trace in memory at a time
    t0 = time.perf_counter()
    tr = load_trace(sys.argv[1])
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
mem = sum(a.nbytes for a in tr.arrays)
print(json.dumps(dict(load_s=best, rows=tr.n_accesses, array_bytes=mem,
                      peak_growth=status_kib("VmHWM") * 1024 - base)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    out = HERE / "out"
    small = out / "load_warmup.uvmtrace"
    if not small.exists():
        from uvmsim.trace import synth
        synth.write("random", small, footprint_bytes=64 << 20, kernels=2, pages_per_kernel=64)
    for name, layout in LAYOUTS.items():
        path = out / f"load_{name}.uvmtrace"
        if not path.exists():
            t0 = time.perf_counter()
            write(path, layout)
            print(f"wrote {path} in {time.perf_counter() - t0:.1f} s", flush=True)
        env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
        res = json.loads(subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(ROOT), str(small), str(a.repeat)],
            env=env, check=True, capture_output=True, text=True).stdout.strip()
            .splitlines()[-1])
        disk = sum(f.stat().st_size for f in path.iterdir())
        rows = res["rows"]
        print(f"[{name}] {rows:,} rows: load {res['load_s']:.2f} s (best of {a.repeat}, one "
              f"core) = {rows / res['load_s'] / 1e6:.1f} M rows/s; {disk / rows:.2f} bytes/row "
              f"on disk, {res['array_bytes'] / rows:.2f} in memory, peak RSS growth "
              f"{res['peak_growth'] / rows:.1f} bytes/row", flush=True)


if __name__ == "__main__":
    main()
