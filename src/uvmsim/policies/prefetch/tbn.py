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

from ...engine.bits import lanes16, popcount, word_mask
from ..base import PrefetchPolicy, register_prefetch


@njit(cache=True)
def prefetch(st, S, T, blk, lo, hi):
    # v: bit `leaf` set when that 16-page leaf is valid (holds a resident or faulted page)
    v = np.uint64(0)
    for w in range(8):
        v |= lanes16(S.rbits[w] | S.fbits[w]) << np.uint64(4 * w)
    # bottom-up over node sizes 2..32 leaves: a child is settled before its parent is looked at
    s = 2
    while s <= 32:
        full = (np.uint64(1) << np.uint64(s)) - np.uint64(1)
        for n0 in range(0, 32, s):
            node = full << np.uint64(n0)
            cnt = np.int64(popcount(v & node))
            if cnt != s and cnt * 2 > s:
                v |= node
        s *= 2
    for w in range(8):
        m = np.uint64(0)
        for k in range(4):
            if (v >> np.uint64(4 * w + k)) & np.uint64(1):
                m |= np.uint64(0xFFFF) << np.uint64(16 * k)
        S.pbits[w] = m & word_mask(w, lo, hi) & ~S.fbits[w]


TBN = register_prefetch(PrefetchPolicy(
    "tbn", prefetch,
    doc="UVMSmart's tree-based neighbourhood: 64 KiB leaves, fill any node > 50 % valid.",
    source="DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc "
           "(traverse_and_fill_lp_tree); Ganguly et al., ISCA'19"))
