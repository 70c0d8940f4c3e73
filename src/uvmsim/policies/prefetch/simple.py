"""Fixed-granularity prefetchers: none, 64k (big page) and 2m (whole VA block).

Source: docs/semantics.md; UVMSmart's sequential-local 64 KiB prefetcher is the 64k one.
"""
from __future__ import annotations

from numba import njit

from ...engine.bits import fill16, word_mask
from ..base import PrefetchPolicy, register_prefetch


@njit(cache=True)
def prefetch_none(st, S, T, blk, lo, hi):
    return


@njit(cache=True)
def prefetch_64k(st, S, T, blk, lo, hi):
    # every in(K) page of each 16-page big page holding a fault (the engine clips to lo..hi)
    for w in range(8):
        if S.fbits[w]:
            S.pbits[w] = fill16(S.fbits[w])


@njit(cache=True)
def prefetch_2m(st, S, T, blk, lo, hi):
    for w in range(8):
        S.pbits[w] = word_mask(w, lo, hi)


NONE = register_prefetch(PrefetchPolicy(
    "none", prefetch_none, doc="Migrate only faulted pages.", source="docs/semantics.md"))
BIG_PAGE = register_prefetch(PrefetchPolicy(
    "64k", prefetch_64k, doc="Migrate the whole 64 KiB big page around each fault.",
    source="docs/semantics.md"))
WHOLE_BLOCK = register_prefetch(PrefetchPolicy(
    "2m", prefetch_2m, doc="Migrate the whole VA block (its pages in the 2 MiB window).",
    source="docs/semantics.md"))
