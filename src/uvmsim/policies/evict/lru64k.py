"""LRU over 64 KiB basic blocks: finer eviction units inside 2 MiB chunks.

Each (chunk, 64 KiB leaf) is a list node, moved to the most-recent end when pages are made
resident in it. The victim is the least recent leaf that still holds a resident page; the
engine copies that leaf back and frees the chunk once its last page has left, asking again
until a chunk is free (so leaves of several chunks may go before one chunk empties).

Source: UVMSmart's sequential-local 64 KB eviction (gpgpu-sim_UVMSmart, get_eviction_granularity).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...engine.state import RES
from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict
from .lru2m import LruState, push_recent, unlink

LEAF = 16  # pages per 64 KiB leaf


def init(ctx: PolicyContext) -> LruState:
    n = ctx.n_chunks * 32
    return LruState(np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                    np.full(2, -1, np.int64), np.zeros(n, np.uint8))


@njit(cache=True)
def leaf_resident(S, T, blk, leaf):
    """Whether window leaf `leaf` of block `blk` holds a resident page."""
    lo = max(leaf * 16, T.b_lo[blk])
    hi = min(leaf * 16 + 15, T.b_hi[blk])
    p0 = T.b_page0[blk] - T.b_lo[blk]
    for pos in range(lo, hi + 1):
        if S.pstate[p0 + pos] & RES:
            return True
    return False


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    if n_new == 0:
        return
    for leaf in range(first >> 4, (last >> 4) + 1):
        if leaf_resident(S, T, blk, leaf):
            push_recent(st, chunk * 32 + leaf)


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    for leaf in range(32):
        unlink(st, chunk * 32 + leaf)


@njit(cache=True)
def pop_oldest_leaf(st, S, T):
    """Unlink and return (chunk, leaf) of the least recent leaf that still holds pages (of
    a chunk this eviction may take: the others keep their place)."""
    node = st.ends[0]
    while True:
        nxt = st.next[node]
        c = node >> 5
        leaf = node & 31
        blk = S.chunk_block[c]
        # leaves emptied behind the policy's back (prefetch to the CPU) are dropped
        if blk >= 0 and leaf_resident(S, T, blk, leaf):
            if may_evict(S, c):
                unlink(st, node)
                return c, leaf
        else:
            unlink(st, node)
        node = nxt


@njit(cache=True)
def victim(st, S, T, tick):
    c, leaf = pop_oldest_leaf(st, S, T)
    S.victim[0] = c
    S.victim[1] = leaf * 16
    S.victim[2] = leaf * 16 + 15


LRU64K = register_evict(EvictPolicy(
    "lru64k", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit, init=init,
    doc="LRU over 64 KiB leaves (by migration); a chunk is freed when its last page leaves.",
    source="UVMSmart sequential-local 64 KB eviction (gpgpu-sim_UVMSmart)"))
