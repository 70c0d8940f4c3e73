"""A walker component of your own: half the page-table walkers reserved for tenant 0, the
other half shared by the other tenants (docs/policies.md, "Tenant components", shows this
file).

From the repository's root, with .venv active (`source .venv/bin/activate`):

    python examples/custom_walkers.py
    uvmsim multi traces/microbench.uvmtrace traces/gpt2_small.uvmtrace --oversub 1.5 \
        --translation walkers=4 --walkers examples.custom_walkers:RESERVED

The first runs two bundled traces as tenants with four walkers, shared and then two of them
reserved for tenant 0, and prints each tenant's slowdown and time queueing for a walker
(on these two traces reserving half the walkers helps neither tenant: the small one queues
little either way); the second is the reserved run from the command line.
"""
from numba import njit
import numpy as np
from uvmsim.components.walkers import WalkerScheduler, register_walkers


@njit(cache=True)
def pick(st, S, ten, t):
    h = st[0][0]
    lo, hi = (0, h) if ten == 0 else (h, S.walk_free.size)
    wk = lo
    for i in range(lo + 1, hi):
        if S.walk_free[i] < S.walk_free[wk]:
            wk = i
    return wk


def init(ctx):
    return (np.array([max(ctx.walkers // 2, 1)], np.int64),)


def pools(ctx):      # the reference model's FIFO pools: tenant 0's, everyone else's
    h = max(ctx.walkers // 2, 1)
    return [list(range(h)), list(range(h, ctx.walkers))]


RESERVED = register_walkers(WalkerScheduler(
    "reserved0", pick=pick, init=init, pools=pools,
    choose=lambda ctx, wf, ten, t: 0 if ten == 0 else 1,
    doc="Half the walkers reserved for tenant 0, the rest shared by the others."),
    replace=True)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    import uvmsim
    from uvmsim.multi import simulate_multi

    # the component from this module by its importable name, the one the command line
    # uses, so its compiled engine is cached on disk and shared (hooks defined in __main__
    # are compiled again in every run); replace=True above lets both copies register
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    import examples.custom_walkers  # noqa: E402,F401

    traces = root / "traces"
    names = ["microbench", "gpt2_small"]   # tenant 0 gets the reserved walkers
    ts = [uvmsim.load_trace(traces / f"{n}.uvmtrace") for n in names]
    print("two tenants, 4 page-table walkers, factor 1.5: slowdown over running alone, "
          "and time queueing for a walker")
    for walkers in ("shared", "reserved0"):
        mr = simulate_multi(ts, oversub=1.5, translation={"walkers": 4}, walkers=walkers)
        for n, (_, row) in zip(names, mr.table.iterrows()):
            print(f"  {walkers:<9} tenant {int(row['tenant'])} {n:<11} slowdown "
                  f"{row['slowdown']:.3f}  walk queue {row['walk_queue_ns'] / 1e6:,.1f} ms")
