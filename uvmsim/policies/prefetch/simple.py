"""Fixed-granularity prefetchers: none, 64k (big page) and 2m (whole VA block).

Source: driver-model.md; UVMSmart's sequential-local 64 KiB prefetcher is the 64k one.
"""
from __future__ import annotations

from numba import njit

from ..base import PrefetchPolicy, register_prefetch


@njit(cache=True)
def prefetch_none(st, S, T, blk, lo, hi):
    return


@njit(cache=True)
def prefetch_64k(st, S, T, blk, lo, hi):
    # every in(K) page of each 16-page big page holding a fault
    for g in range(lo & ~15, hi + 1, 16):
        hit = False
        for p in range(max(g, lo), min(g + 16, hi + 1)):
            if S.fmask[p]:
                hit = True
                break
        if hit:
            for p in range(max(g, lo), min(g + 16, hi + 1)):
                S.pmask[p] = 1


@njit(cache=True)
def prefetch_2m(st, S, T, blk, lo, hi):
    for p in range(lo, hi + 1):
        S.pmask[p] = 1


NONE = register_prefetch(PrefetchPolicy(
    "none", prefetch_none, doc="Migrate only faulted pages.", source="driver-model.md"))
BIG_PAGE = register_prefetch(PrefetchPolicy(
    "64k", prefetch_64k, doc="Migrate the whole 64 KiB big page around each fault.",
    source="driver-model.md"))
WHOLE_BLOCK = register_prefetch(PrefetchPolicy(
    "2m", prefetch_2m, doc="Migrate the whole VA block (its pages in the 2 MiB window).",
    source="driver-model.md"))
