"""UVMSmart's tree-based neighbourhood pre-eviction (TBN) over 64 KiB leaves.

The victim is the least recently migrated-into 64 KiB leaf (as `lru64k`). After it leaves,
the chunk's 2 MiB tree is walked bottom-up: every node that is still partly valid but less
than half valid is evicted whole (pre-eviction), which can tip its parent under one half.
Pre-evicted leaves are handed to the engine on the following victim calls of the same
eviction; ones still pending when a chunk has come free go first at the next eviction (and are
dropped if their chunk has changed hands meanwhile, or if that eviction may not take them:
uvmsim.policies.base.may_evict).

Source: DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc
(`traverse_and_remove_lp_tree`, `remove_lp_tree`), ISCA'19.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict
from .lru2m import LruState, unlink
from .lru64k import (leaf_resident, on_fill as _fill64k, on_release as _release64k,
                     pop_oldest_leaf)


# lru64k's list (prev, next, ends, linked over leaf nodes chunk*32 + leaf), then the pending
# pre-evictions: leaf nodes (a stack), the block each belonged to, their number, and
# scratch for the valid leaves of the victim's tree
TbnState = namedtuple("TbnState", "prev next ends linked pend pend_blk npend valid")


def init(ctx: PolicyContext) -> TbnState:
    n = ctx.n_chunks * 32
    return TbnState(np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                    np.full(2, -1, np.int64), np.zeros(n, np.uint8), np.zeros(32, np.int64),
                    np.zeros(32, np.int64), np.zeros(1, np.int64), np.zeros(32, np.uint8))


@njit(cache=True)
def _lru(st):
    return LruState(st.prev, st.next, st.ends, st.linked)


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    _fill64k(_lru(st), S, T, chunk, blk, first, last, n_new, tick)


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    _release64k(_lru(st), S, T, chunk, blk)


@njit(cache=True)
def victim(st, S, T, tick):
    lru = _lru(st)
    pend, pend_blk, npend, v = st.pend, st.pend_blk, st.npend, st.valid
    while npend[0] > 0:
        node = pend[npend[0] - 1]
        c = node >> 5
        leaf = node & 31
        blk = S.chunk_block[c]
        live = blk >= 0 and blk == pend_blk[npend[0] - 1] and leaf_resident(S, T, blk, leaf)
        if live and not may_evict(S, c):
            # another tenant's tree: its pre-evictions are dropped, not done for it
            npend[0] = 0
            break
        npend[0] -= 1
        if live:
            unlink(lru, node)
            S.victim[0] = c
            S.victim[1] = leaf * 16
            S.victim[2] = leaf * 16 + 15
            return
    c, leaf = pop_oldest_leaf(lru, S, T)
    blk = S.chunk_block[c]
    S.victim[0] = c
    S.victim[1] = leaf * 16
    S.victim[2] = leaf * 16 + 15
    # the tree of c as it will be once the victim leaf has left
    for x in range(32):
        v[x] = 1 if (x != leaf and leaf_resident(S, T, blk, x)) else 0
    s = 2
    while s <= 32:
        for n0 in range(0, 32, s):
            cnt = 0
            for x in range(n0, n0 + s):
                cnt += v[x]
            if cnt != 0 and cnt * 2 < s:
                for x in range(n0, n0 + s):
                    if v[x]:
                        v[x] = 0
                        pend[npend[0]] = c * 32 + x
                        pend_blk[npend[0]] = blk
                        npend[0] += 1
        s *= 2


TBN_EVICT = register_evict(EvictPolicy(
    "tbn", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit, init=init,
    doc="UVMSmart's TBN pre-eviction: LRU 64 KiB leaf, then every node < 50 % valid.",
    source="DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc "
           "(traverse_and_remove_lp_tree); Ganguly et al., ISCA'19"))
