"""`dws`: dynamic walker sharing. A tenant owns an equal share of the walkers, as in
`partitioned`, and its walks use them first; when none of its own is idle at the miss, the
walk takes another tenant's idle walker (the one idle longest; ties: the lowest index), and
only when no walker at all is idle does it queue (FIFO) for its own. The TLB stays shared.

After page-walk stealing for multi-tenant GPUs (Pratheek et al., HPCA 2021): idle walkers
serve a busy tenant, while a tenant's own walkers keep serving it first.
"""
from __future__ import annotations

from numba import njit

from .base import WalkerScheduler, register_walkers, share_pools, tenant_shares


@njit(cache=True)
def pick(st, S, ten, t):
    lo, hi = st.lo, st.hi
    wf = S.walk_free
    own = lo[ten]
    for i in range(lo[ten] + 1, hi[ten]):
        if wf[i] < wf[own]:
            own = i
    if wf[own] <= t:
        return own
    other = -1
    for i in range(wf.size):
        if (i < lo[ten] or i >= hi[ten]) and wf[i] <= t and (other < 0 or wf[i] < wf[other]):
            other = i
    return own if other < 0 else other


def choose(ctx, wf, ten, t):
    """The reference model's mirror: own pool if one of its walkers is idle at t, else the
    pool of the other tenants' walker idle longest, else queue in the own pool."""
    pools = share_pools(ctx)
    if min(wf[w] for w in pools[ten]) <= t:
        return ten
    idle = [(wf[w], w, p) for p, ws in enumerate(pools) if p != ten for w in ws if wf[w] <= t]
    return min(idle)[2] if idle else ten


DWS = register_walkers(WalkerScheduler(
    "dws", pick=pick, init=tenant_shares, pools=share_pools, choose=choose,
    doc="Own walker share first, then other tenants' idle walkers; shared TLB.",
    source="page-walk stealing, Pratheek et al. HPCA 2021"))
