"""A sweep's wall time on an empty engine cache, with and without its first wave.

    PYTHONPATH=src python benchmarks/sweep_cold.py waves      # as uvmsim.sweep runs it
    PYTHONPATH=src python benchmarks/sweep_cold.py nowaves    # every cell submitted at once

4 prefetch policies x 3 factors (12 cells, 4 engines) of a small synthetic training trace
on a pool of 2 processes, each run with a new, empty engine cache, so the time is mostly
compiling. Prints the mode, the wall time, the cells and the sum of their faults (equal in
both modes). Figures: docs/performance.md, "Simulated sweeps".
"""
import os
import sys
import tempfile
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "waves"
if mode not in ("waves", "nowaves"):
    sys.exit("usage: sweep_cold.py [waves|nowaves]")


def main(cache: str) -> None:
    os.environ["UVMSIM_CACHE_DIR"] = cache  # before any engine is built
    import uvmsim.sweep as sw
    from uvmsim.trace import synth
    if mode == "nowaves":
        sw.waves = lambda tasks: [tasks]
    t = synth.make("training", layers=2, steps=1, weight_bytes=3 << 20,
                   activation_bytes=5 << 20)
    t0 = time.perf_counter()
    df = sw.sweep(t, oversub=[1.0, 1.5, 2.0], prefetch=["density", "none", "64k", "2m"],
                  jobs=2, progress=False)
    print(mode, f"{time.perf_counter() - t0:.1f} s", f"{len(df)} cells",
          f"{int(df['faults'].sum())} faults", flush=True)


with tempfile.TemporaryDirectory(prefix="uvmsim-coldsweep-") as d:
    main(d)
