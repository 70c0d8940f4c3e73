"""LRU over 4 KiB pages: the finest eviction unit.

Each (chunk, window position) is a list node, moved to the most-recent end when the page is
made resident. The victim is the least recent resident page; the engine frees a chunk once its
last page has left and asks again until a chunk is free. Recency is by migration, as the
driver's (GPU hits are invisible to it); pair with `lru2m_access` for recency of use.

Source: UVMSmart's LRU 4KB eviction (gpgpu-sim_UVMSmart, eviction_policy 5).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...engine.state import RES
from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict
from .lru2m import LruState, push_recent, unlink


def init(ctx: PolicyContext) -> LruState:
    # int32 links: 512 nodes per chunk would cost 8 KiB per chunk at int64
    n = ctx.n_chunks * 512
    return LruState(np.full(n, -1, np.int32), np.full(n, -1, np.int32),
                    np.full(2, -1, np.int64), np.zeros(n, np.uint8))


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    if n_new == 0:
        return
    p0 = T.b_page0[blk] - T.b_lo[blk]
    for pos in range(first, last + 1):
        if S.pstate[p0 + pos] & RES:
            push_recent(st, chunk * 512 + pos)


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    for pos in range(512):
        if st.linked[chunk * 512 + pos]:
            unlink(st, chunk * 512 + pos)


@njit(cache=True)
def victim(st, S, T, tick):
    node = st.ends[0]
    while True:
        nxt = st.next[node]
        c = node >> 9
        pos = node & 511
        blk = S.chunk_block[c]
        if (blk >= 0 and T.b_lo[blk] <= pos and pos <= T.b_hi[blk]
                and S.pstate[T.b_page0[blk] - T.b_lo[blk] + pos] & RES):
            # a page of a chunk this eviction may not take keeps its place
            if may_evict(S, c):
                unlink(st, node)
                S.victim[0] = c
                S.victim[1] = pos
                S.victim[2] = pos
                return
        else:
            unlink(st, node)
        node = nxt


LRU4K = register_evict(EvictPolicy(
    "lru4k", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit, init=init,
    doc="LRU over 4 KiB pages (by migration); a chunk is freed when its last page leaves.",
    source="UVMSmart LRU 4KB eviction (gpgpu-sim_UVMSmart)"))
