"""UVMSmart's tree-based neighbourhood prefetcher (TBN), over the 2 MiB window.

The window is a full binary tree whose 32 leaves are 64 KiB basic blocks. A leaf is valid when
it holds a resident or faulted page; each faulted leaf is filled whole. Then, bottom-up, every
node more than half valid (and not fully valid) is filled whole, so filling one node can tip its
parent over one half. P = the in(K) pages of every valid leaf, minus F.

Source: DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc (`traverse_and_fill_lp_tree`,
`fill_lp_tree`); ISCA'19. Leaves outside in(K) count as invalid (UVMSmart's tree covers the
allocation rounded up to 2 MiB and never transfers those leaves either).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..base import PolicyContext, PrefetchPolicy, register_prefetch


def init(ctx: PolicyContext) -> tuple:
    # st[0]: leaf valid flags (scratch, 32 leaves of 16 pages)
    return (np.zeros(32, np.uint8),)


@njit(cache=True)
def prefetch(st, S, T, blk, lo, hi):
    v = st[0]
    for leaf in range(32):
        v[leaf] = 0
    for p in range(lo, hi + 1):
        if S.rmask[p] or S.fmask[p]:
            v[p >> 4] = 1
    # bottom-up over node sizes 2..32 leaves: a child is settled before its parent is looked at
    s = 2
    while s <= 32:
        for n0 in range(0, 32, s):
            cnt = 0
            for leaf in range(n0, n0 + s):
                cnt += v[leaf]
            if cnt != s and cnt * 2 > s:
                for leaf in range(n0, n0 + s):
                    v[leaf] = 1
        s *= 2
    for p in range(lo, hi + 1):
        if v[p >> 4] and not S.fmask[p]:
            S.pmask[p] = 1


TBN = register_prefetch(PrefetchPolicy(
    "tbn", prefetch, init=init,
    doc="UVMSmart's tree-based neighbourhood: 64 KiB leaves, fill any node > 50 % valid.",
    source="DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc "
           "(traverse_and_fill_lp_tree); Ganguly et al., ISCA'19"))
