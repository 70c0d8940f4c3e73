"""The driver's eviction: LRU over 2 MiB chunks by recency of migration (uvm_pmm_gpu.c).

A chunk moves to the most-recent end whenever pages are made resident in it, never on hits;
the least-recent chunk is evicted whole.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict


def init(ctx: PolicyContext) -> tuple:
    n = ctx.n_chunks
    # prev/next links over chunks (-1 = none); ends[0] head (least recent), ends[1] tail
    return (np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.full(2, -1, np.int64),
            np.zeros(n, np.uint8))


@njit(cache=True)
def unlink(st, c):
    prev, nxt, ends, linked = st
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


@njit(cache=True)
def push_recent(st, c):
    prev, nxt, ends, linked = st
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
def on_hit_touch(st, S, T, chunk, blk, pos, tick):
    push_recent(st, chunk)


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    unlink(st, chunk)


@njit(cache=True)
def victim(st, S, T, tick):
    c = st[2][0]
    while not may_evict(S, c):
        c = st[1][c]
    S.victim[0] = c
    S.victim[1] = 0
    S.victim[2] = 511


LRU2M = register_evict(EvictPolicy(
    "lru2m", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit, init=init,
    doc="The driver's: least recently migrated-into 2 MiB chunk, evicted whole.",
    source="open-gpu-kernel-modules kernel-open/nvidia-uvm/uvm_pmm_gpu.c; driver-model.md"))
