"""Write your own eviction and prefetch policies, register them, and replay with them.

Run:  PYTHONPATH=src python examples/custom_policy.py
CLI:  uvmsim replay traces/microbench.uvmtrace --oversub 1.5 --evict examples.custom_policy:MRU2M
      (from the repository's root, with .venv active)

A policy is a few Numba functions with fixed signatures (src/uvmsim/policies/base.py,
docs/policies.md) over the engine state S (read-only: S.pstate, S.bres, S.chunk_block, ...)
and the trace T (T.row_page, T.page_block, T.row_count, ...), plus an `init(ctx)` that returns
the policy's own state as a tuple of NumPy arrays. The engine compiles the hooks inline, so a
user policy runs at engine speed. Hooks defined in an importable module are compiled once and
cached on disk; hooks defined in a notebook or `__main__` work too, compiled per process.
"""
from __future__ import annotations

import numpy as np
from numba import njit

import uvmsim
from uvmsim.engine.bits import first_set, set_range
from uvmsim.policies import EvictPolicy, PolicyContext, PrefetchPolicy, no_hit
from uvmsim.policies.base import may_evict, register_evict, register_prefetch


# ---- eviction: most recently migrated-into chunk first (MRU), good for cyclic scans

def mru_init(ctx: PolicyContext) -> tuple:
    # st[0][c]: tick at which chunk c last received pages (-1: free)
    return (np.full(ctx.n_chunks, -1, np.int64),)


@njit(cache=True)
def mru_on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    st[0][chunk] = tick


@njit(cache=True)
def mru_on_release(st, S, T, chunk, blk):
    st[0][chunk] = -1


@njit(cache=True)
def mru_victim(st, S, T, tick):
    stamp = st[0]
    best = -1
    for c in range(stamp.size):
        # may_evict: with several tenants an eviction may be restricted to one's chunks
        if S.chunk_block[c] >= 0 and may_evict(S, c) and (best < 0 or stamp[c] > stamp[best]):
            best = c
    S.victim[0] = best   # the chunk,
    S.victim[1] = 0      # and the window positions to copy back (all of it)
    S.victim[2] = 511


MRU2M = register_evict(EvictPolicy(
    "example_mru2m", victim=mru_victim, on_fill=mru_on_fill, on_release=mru_on_release,
    on_hit=no_hit, init=mru_init, doc="Most recently migrated-into 2 MiB chunk.",
    source="examples/custom_policy.py"), replace=True)


# ---- prefetch: the faulted page and the next `ahead` pages of the block

def ahead_init(ctx: PolicyContext) -> tuple:
    return (np.array([ctx.params["ahead"]], np.int64),)


@njit(cache=True)
def ahead_prefetch(st, S, T, blk, lo, hi):
    # S.fbits / S.pbits: the block's faulted / chosen positions, one bit each (8 x uint64);
    # uvmsim.engine.bits has the helpers
    n = st[0][0]
    p = first_set(S.fbits, 0, lo, hi)
    while p >= 0:
        if p < hi:
            set_range(S.pbits, 0, p + 1, min(hi, p + n))
        p = first_set(S.fbits, 0, p + 1, hi) if p < hi else -1


AHEAD = register_prefetch(PrefetchPolicy(
    "example_ahead", ahead_prefetch, init=ahead_init, params={"ahead": 8.0},
    doc="Each fault brings the next `ahead` pages.", source="examples/custom_policy.py"),
    replace=True)


if __name__ == "__main__":
    from uvmsim.trace import synth
    t = synth.make("sequential", footprint_bytes=64 << 20, kernels=4)
    for ev in ("lru2m", "example_mru2m", "belady2m"):
        r = uvmsim.simulate(t, oversub=1.5, evict=ev)
        print(f"{ev:>14}: faults={r.summary['faults']} evicted={r.summary['evicted_chunks']}")
    r = uvmsim.simulate(t, oversub=1.5, prefetch="example_ahead", prefetch_params={"ahead": 32})
    print(f"{'example_ahead':>14}: faults={r.summary['faults']}")
