"""A walker component of your own: half the page-table walkers reserved for tenant 0, the
other half shared by the other tenants (docs/policies.md, "Tenant components", shows this
file).

    uvmsim multi A.uvmtrace B.uvmtrace --translation walkers=4 --walkers custom_walkers:RESERVED
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
    doc="Half the walkers reserved for tenant 0, the rest shared by the others."))
