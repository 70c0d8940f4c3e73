"""Uniformly random 2 MiB chunk, from a seeded xorshift64* stream (ctx.seed).

The same seed gives the same victims on the same trace; `seed=` of simulate() sets it.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict


# members: chunks in use (a dense prefix of length size[0]); where: each chunk's index in
# members or -1; rng: the xorshift64* state
RandomState = namedtuple("RandomState", "members where size rng")


def init(ctx: PolicyContext) -> RandomState:
    n = ctx.n_chunks
    # xorshift state must be non-zero; mix the seed so seeds 0, 1, 2 are unrelated streams
    s = (int(ctx.seed) * 0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF
    return RandomState(np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                       np.zeros(1, np.int64), np.array([s or 1], np.uint64))


@njit(cache=True)
def _next(state):
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    return x * np.uint64(0x2545F4914F6CDD1D)


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    members, where, size = st.members, st.where, st.size
    if where[chunk] < 0:
        where[chunk] = size[0]
        members[size[0]] = chunk
        size[0] += 1


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    members, where, size = st.members, st.where, st.size
    i = where[chunk]
    if i < 0:
        return
    last = members[size[0] - 1]
    members[i] = last
    where[last] = i
    where[chunk] = -1
    members[size[0] - 1] = -1
    size[0] -= 1


@njit(cache=True)
def victim(st, S, T, tick):
    members, size = st.members, st.size
    i = np.int64(_next(st.rng) % np.uint64(size[0]))
    while not may_evict(S, members[i]):
        i = (i + 1) % size[0]
    S.victim[0] = members[i]
    S.victim[1] = 0
    S.victim[2] = 511


RANDOM2M = register_evict(EvictPolicy(
    "random2m", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit,
    init=init, doc="A uniformly random chunk in use (seeded by simulate(seed=...)).",
    source="UVMSmart's Random eviction (gpgpu-sim_UVMSmart), at 2 MiB; G10's random",
    shared_roots=True))
