"""Compile the replay engines of policy pairs into $UVMSIM_CACHE_DIR, so that a benchmark run
after it measures without compiling (benchmarks/before_after_parallel.sh).

    python benchmarks/prewarm_engines.py --pairs          # the pairs the benchmarks replay
    python benchmarks/prewarm_engines.py density/lru2m    # compile these

The pairs are those of benchmarks/policy_throughput.py (every prefetch policy with lru2m,
every eviction policy with density) and replay_throughput.py (none/lru2m); it imports the
uvmsim on the path, so it works for an older tree as well.
"""
import sys

import uvmsim
from uvmsim.policies import EVICT, PREFETCH
from uvmsim.trace import synth

if __name__ == "__main__":
    if sys.argv[1:] == ["--pairs"]:
        pairs = ({(p, "lru2m") for p in PREFETCH} | {("density", e) for e in EVICT}
                 | {("none", "lru2m")})
        print(" ".join(f"{p}/{e}" for p, e in sorted(pairs)))
        raise SystemExit(0)
    t = synth.make("training", layers=2, steps=1, seed=1)
    for pair in sys.argv[1:]:
        pf, ev = pair.split("/")
        uvmsim.simulate(t, oversub=1.25, prefetch=pf, evict=ev)
    print(uvmsim.__file__, sys.argv[1:])
