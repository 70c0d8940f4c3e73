"""Replay throughput, load time and memory per access row of the fast engine.

    python benchmarks/replay_throughput.py            # 20.4 M-row training trace
    python benchmarks/replay_throughput.py --cold     # also measure a cold compile

Builds (once, cached under benchmarks/out/) a synthetic layer-by-layer training trace of at
least 20 million access rows, then, in a fresh process pinned to one core, loads it and
replays it at factor 1.5 with density/lru2m. Prints access rows per second (compile
excluded and printed separately), load time and peak memory per access row.
Goals (issue 2): >= 30 M rows/s, load <= 2 s, <= 24 bytes per row.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

TRACES = {
    # 16 layers x (64 MiB weights + 128 MiB activations), 6 steps: 20.4 M rows, 4 GiB
    "training": dict(layers=16, weight_bytes=64 << 20, activation_bytes=128 << 20, steps=6),
    # uniform random pages over 8 GiB, 40 kernels of 512 Ki rows: 21 M rows
    "random": dict(footprint_bytes=8 << 30, kernels=40, pages_per_kernel=1 << 19),
    # Zipf(1.2) hot/cold over 8 GiB, 40 kernels of 512 Ki rows: 21 M rows
    "zipf": dict(footprint_bytes=8 << 30, kernels=40, pages_per_kernel=1 << 19),
}


def ensure_trace(kind: str) -> Path:
    from uvmsim.trace import synth
    out = HERE / "out" / f"bench_{kind}.uvmtrace"
    if not out.exists():
        t0 = time.perf_counter()
        synth.write(kind, out, **TRACES[kind])
        print(f"built {out} in {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def measure(trace: Path, *, cold: bool, **kw) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if cold:
        env["UVMSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="uvmsim-cold-")
    cmd = [sys.executable, str(HERE / "_measure.py"), str(trace), "--one-core"]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=sorted(TRACES), action="append",
                    help="trace kind(s) (default: training)")
    ap.add_argument("--prefetch", default="density")
    ap.add_argument("--evict", default="lru2m")
    ap.add_argument("--oversub", type=float, default=1.5)
    ap.add_argument("--cold", action="store_true", help="also time a compile from scratch")
    ap.add_argument("--repeat", type=int, default=3, help="replays per kind; best is shown")
    a = ap.parse_args()
    for kind in a.kind or ["training"]:
        trace = ensure_trace(kind)
        runs = [measure(trace, cold=False, prefetch=a.prefetch, evict=a.evict,
                        oversub=a.oversub) for _ in range(a.repeat)]
        best = max(runs, key=lambda r: r["rows_per_s"])
        print(f"[{kind}] {best['rows']:,} access rows, {best['kernels']} kernels, "
              f"peak_blocks {best['peak_blocks']}, {a.prefetch}/{a.evict} at factor "
              f"{a.oversub}, one core")
        print(f"  replay      {best['replay_s']:.3f} s = {best['rows_per_s'] / 1e6:.1f} M rows/s "
              f"(best of {a.repeat}; all: "
              + ", ".join(f"{r['rows_per_s'] / 1e6:.1f}" for r in runs) + ")")
        print(f"  load        {min(r['load_s'] for r in runs):.2f} s")
        print(f"  memory      {best['bytes_per_row']:.1f} bytes per access row "
              f"(peak RSS {best['peak_rss_mib']:.0f} MiB over a {best['baseline_rss_mib']:.0f} "
              f"MiB baseline; {best['load_bytes_per_row']:.1f} bytes per row by the end of "
              "loading)")
        print(f"  compile     {best['compile_s']:.2f} s warm (engine from the disk cache)")
        if a.cold:
            c = measure(trace, cold=True, prefetch=a.prefetch, evict=a.evict, oversub=a.oversub)
            print(f"  compile     {c['compile_s']:.2f} s cold (empty engine cache)")
        print(f"  counts      faults {best['faults']:,}, evicted chunks "
              f"{best['evicted_chunks']:,}", flush=True)


if __name__ == "__main__":
    main()
