"""LFU over 2 MiB chunks: evict the chunk used least since it was taken.

Use = every access row that hits the chunk (weighted by the row's `count`) plus every page
made resident in it. Ties go to the chunk taken earliest. Counts restart when a chunk is freed.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ..base import EvictPolicy, PolicyContext, may_evict, register_evict


# use of each chunk, and the tick at which it was taken (-1 = free)
LfuState = namedtuple("LfuState", "freq since")


def init(ctx: PolicyContext) -> LfuState:
    n = ctx.n_chunks
    return LfuState(np.zeros(n, np.int64), np.full(n, -1, np.int64))


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    if st.since[chunk] < 0:
        st.since[chunk] = tick
    st.freq[chunk] += n_new


@njit(cache=True)
def on_hit(st, S, T, chunk, blk, pos, tick):
    st.freq[chunk] += T.row_count[tick]


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    st.freq[chunk] = 0
    st.since[chunk] = -1


@njit(cache=True)
def victim(st, S, T, tick):
    freq, since = st.freq, st.since
    best = -1
    for c in range(freq.size):
        if S.chunk_block[c] < 0 or not may_evict(S, c):
            continue
        if best < 0 or freq[c] < freq[best] or (freq[c] == freq[best]
                                                 and since[c] < since[best]):
            best = c
    S.victim[0] = best
    S.victim[1] = 0
    S.victim[2] = 511


LFU2M = register_evict(EvictPolicy(
    "lfu2m", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=on_hit, init=init,
    doc="Least frequently used 2 MiB chunk (accesses weighted by count, since it was taken).",
    source="UVMSmart's LFU 2MB (gpgpu-sim_UVMSmart); gpu_ext LFU"))
