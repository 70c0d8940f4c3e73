"""`partitioned`: each tenant owns an equal share of the walkers and of the TLB's sets.

MIG-like static partitioning of translation hardware: a tenant's walks queue (FIFO) only
for its own walkers, and its translations live only in its own slice of the TLB, so one
tenant's burst of misses can neither delay another's walks nor evict its entries. Idle
walkers of one tenant never serve another.
"""
from __future__ import annotations

from numba import njit

from .base import WalkerScheduler, register_walkers, share_pools, tenant_shares


@njit(cache=True)
def pick(st, S, ten, t):
    lo, hi = st.lo, st.hi
    wk = lo[ten]
    for i in range(lo[ten] + 1, hi[ten]):
        if S.walk_free[i] < S.walk_free[wk]:
            wk = i
    return wk


PARTITIONED = register_walkers(WalkerScheduler(
    "partitioned", pick=pick, init=tenant_shares, pools=share_pools,
    choose=lambda ctx, wf, ten, t: ten, tlb_slices=True,
    doc="A fixed equal share of the walkers and a TLB slice per tenant (MIG-like).",
    source="NVIDIA MIG static partitioning of translation resources"))
