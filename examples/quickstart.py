"""Quickstart: one trace, one call, a DataFrame and a plot.

    python examples/quickstart.py [TRACE]

Without an argument it uses the README's bundled real trace (traces/MAIN names it).
"""
from __future__ import annotations

import sys
from pathlib import Path

import uvmsim
from uvmsim.plot import plot_sweep
from uvmsim.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]
path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / (ROOT / "traces" / "MAIN").read_text().strip()

trace = uvmsim.load_trace(path)
print(trace)

# one replay: counts per the driver model, time from the default hardware preset
r = uvmsim.simulate(trace, oversub=2.0, prefetch="density", evict="lru2m")
print({k: r.summary[k] for k in ("faults", "fault_batches", "htod_bytes", "evicted_chunks",
                                 "sim_time_ns")})

# the kernels that stall most under 2x oversubscription
print(r.kernels.nlargest(5, "stall_ns")[["name", "faults", "htod_bytes", "stall_ns"]])

# a sweep over policies and factors, as a table and a plot
df = sweep(trace, oversub=[1.0, 1.5, 2.0, 3.0], prefetch=["none", "64k", "density"])
print(df[["prefetch", "oversub", "faults", "evicted_chunks", "slowdown"]])
out = ROOT / "out"
out.mkdir(exist_ok=True)
plot_sweep(df, title=path.name, path=out / "quickstart.png")
print("plot:", out / "quickstart.png")
