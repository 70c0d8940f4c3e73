"""The contract's default eviction (docs/semantics.md): LRU over 2 MiB chunks by recency of
migration.

A chunk moves to the most-recent end whenever pages are made resident in it, never on hits;
the least-recent chunk is evicted whole. This is the driver's order: every fault service of a
2 MiB block ends in block_mark_memory_used, which moves its root chunk to the tail of the
used list, and eviction takes the head (docs/model.md, item 3, with the probe that shows it).
With partial_blocks a shared root chunk moves when a unit is allocated in it.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict


# a doubly linked list over nodes (here chunks): prev/next links (-1 = none), ends[0] the
# head (least recent), ends[1] the tail; linked[x] 1 while node x is in the list
LruState = namedtuple("LruState", "prev next ends linked")


def init(ctx: PolicyContext) -> LruState:
    n = ctx.n_chunks
    return LruState(np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                    np.full(2, -1, np.int64), np.zeros(n, np.uint8))


@njit(cache=True, inline="always")
def unlink(st, c):
    prev, nxt, ends, linked = st.prev, st.next, st.ends, st.linked
    if not linked[c]:
        return
    p = prev[c]
    n = nxt[c]
    if p >= 0:
        nxt[p] = n
    else:
        ends[0] = n
    if n >= 0:
        prev[n] = p
    else:
        ends[1] = p
    prev[c] = -1
    nxt[c] = -1
    linked[c] = 0


@njit(cache=True, inline="always")
def push_recent(st, c):
    prev, nxt, ends, linked = st.prev, st.next, st.ends, st.linked
    unlink(st, c)
    t = ends[1]
    prev[c] = t
    nxt[c] = -1
    if t >= 0:
        nxt[t] = c
    else:
        ends[0] = c
    ends[1] = c
    linked[c] = 1


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    push_recent(st, chunk)


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    unlink(st, chunk)


@njit(cache=True)
def victim(st, S, T, tick):
    c = st.ends[0]
    while not may_evict(S, c):
        c = st.next[c]
    S.victim[0] = c
    S.victim[1] = 0
    S.victim[2] = 511


LRU2M = register_evict(EvictPolicy(
    "lru2m", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit, init=init,
    doc="The contract's default: least recently migrated-into 2 MiB chunk, evicted whole.",
    source="open-gpu-kernel-modules kernel-open/nvidia-uvm/uvm_pmm_gpu.c; docs/semantics.md",
    shared_roots=True))
