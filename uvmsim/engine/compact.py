"""The engine's view of a trace: only the 2 MiB blocks it touches.

A trace's dense numbering (uvmsim.trace.TraceArrays) gives every page of every allocation
an index, so per-page engine state sized by it grows with the bytes programs reserve, not
the bytes they use: a 1 TiB managed range with a few pages touched would need 256 M pages
of state. Before a replay the blocks nothing can reach are dropped from the numbering.

A block is touched when an access row falls in it or a range event (memcpy, memset,
prefetch, host access, advise) overlaps it; no other event can make a page of a block
resident or populated, so replaying without the others gives the same counts. The kept
blocks stay in their order and keep their pages in order, so every page simply moves down
by the pages of dropped blocks before it; each allocation's kept blocks stay contiguous.
When every block is touched the trace's own arrays are used unchanged.

Everything here is NumPy over arrays the loader validated, plus one compiled pass over the
rows; the ranges it and the engine will index with are checked first (a bad index there is
a segfault).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import ConfigError
from ..trace.model import TraceArrays


def _check(T: TraceArrays) -> None:
    """Range checks of everything but row_page (checked by _mark_rows as it reads it)."""
    n_pages = T.page_block.size
    n_blocks = T.b_alloc.size
    for name in ("seg_first", "seg_last"):
        x = getattr(T, name)
        if x.size and (int(x.min()) < 0 or int(x.max()) >= n_pages):
            raise ConfigError(f"trace arrays: {name} holds a page outside 0..{n_pages - 1}")
    if T.page_pos.size != n_pages:
        raise ConfigError("trace arrays: page_pos and page_block differ in length")
    if n_pages and (int(T.page_block.min()) < 0 or int(T.page_block.max()) >= n_blocks):
        raise ConfigError(f"trace arrays: page_block holds a block outside 0..{n_blocks - 1}")
    for name in ("b_lo", "b_hi", "b_page0", "b_first_vpage"):
        if getattr(T, name).size != n_blocks:
            raise ConfigError(f"trace arrays: {name} has {getattr(T, name).size} entries for "
                              f"{n_blocks} blocks")
    if n_blocks:
        lo = T.b_lo.astype(np.int64)
        hi = T.b_hi.astype(np.int64)
        if int(lo.min()) < 0 or int(hi.max()) > 511 or bool((hi < lo).any()):
            raise ConfigError("trace arrays: block windows must satisfy 0 <= b_lo <= b_hi <= 511")
        p0 = T.b_page0.astype(np.int64)
        if int(p0.min()) < 0 or int((p0 + hi - lo).max()) >= n_pages:
            raise ConfigError("trace arrays: a block's pages fall outside the page arrays")


@njit(cache=True)
def _mark_rows(row_page, page_block, hit):
    """hit[block of each row's page] = True in one pass with no temporary per row; each
    row's page is range-checked before it indexes (returns the first bad row, else -1).
    page_block was checked by _check."""
    n = page_block.size
    for r in range(row_page.size):
        d = row_page[r]
        if d < 0 or d >= n:
            return r
        hit[page_block[d]] = True
    return -1


def touched_blocks(T: TraceArrays) -> np.ndarray:
    """bool[n_blocks]: blocks an access row or a range event reaches."""
    _check(T)
    n_blocks = T.b_alloc.size
    hit = np.zeros(n_blocks, np.bool_)
    bad = _mark_rows(T.row_page, T.page_block, hit)
    if bad >= 0:
        raise ConfigError(f"trace arrays: row_page holds a page outside "
                          f"0..{T.page_block.size - 1} (access row {bad})")
    if T.seg_first.size:
        # a segment covers blocks page_block[first]..page_block[last]: mark them all by a
        # difference array (+1 at the first block, -1 after the last)
        diff = np.zeros(n_blocks + 1, np.int64)
        np.add.at(diff, T.page_block[T.seg_first].astype(np.int64), 1)
        np.add.at(diff, T.page_block[T.seg_last].astype(np.int64) + 1, -1)
        hit |= np.cumsum(diff[:-1]) > 0
    return hit


def compact(T: TraceArrays) -> TraceArrays:
    """T with only its touched blocks (see the module doc); T itself if all are touched."""
    keep = touched_blocks(T)
    if keep.all():
        return T
    n_blocks = keep.size
    npg = (T.b_hi.astype(np.int64) - T.b_lo.astype(np.int64) + 1)
    # pages of dropped blocks before each block: every page of block b moves down by it
    shift = np.concatenate([[0], np.cumsum(np.where(keep, 0, npg))[:-1]]).astype(np.int64)
    kept = np.flatnonzero(keep)
    slot = np.full(n_blocks, -1, np.int64)
    slot[kept] = np.arange(kept.size, dtype=np.int64)

    def page(d):
        d = d.astype(np.int64)
        return d - shift[T.page_block[d]]

    k_npg = npg[kept]
    n_pages = int(k_npg.sum())
    b_page0 = T.b_page0[kept].astype(np.int64) - shift[kept]
    page_block = np.repeat(np.arange(kept.size, dtype=T.page_block.dtype), k_npg)
    first = np.repeat(b_page0, k_npg)
    page_pos = (np.arange(n_pages, dtype=np.int64) - first
                + np.repeat(T.b_lo[kept].astype(np.int64), k_npg)).astype(T.page_pos.dtype)
    # allocations: their kept blocks are contiguous slots, their kept pages contiguous
    n_alloc = T.a_host.size
    b_alloc = T.b_alloc.astype(np.int64)
    a_nblocks = np.bincount(b_alloc[kept], minlength=n_alloc).astype(T.a_nblocks.dtype)
    a_block_off = np.concatenate([[0], np.cumsum(a_nblocks)[:-1]]).astype(T.a_block_off.dtype)
    a_npages = np.bincount(b_alloc[kept], weights=k_npg, minlength=n_alloc).astype(np.int64)
    a_page_off = np.concatenate([[0], np.cumsum(a_npages)[:-1]]).astype(T.a_page_off.dtype)
    return T._replace(
        a_npages=a_npages.astype(T.a_npages.dtype), a_page_off=a_page_off,
        a_block_off=a_block_off, a_nblocks=a_nblocks,
        page_block=page_block, page_pos=page_pos,
        b_alloc=T.b_alloc[kept], b_lo=T.b_lo[kept], b_hi=T.b_hi[kept],
        b_page0=b_page0.astype(T.b_page0.dtype), b_first_vpage=T.b_first_vpage[kept],
        seg_first=page(T.seg_first).astype(T.seg_first.dtype),
        seg_last=page(T.seg_last).astype(T.seg_last.dtype),
        row_page=page(T.row_page).astype(T.row_page.dtype))


def engine_arrays(trace) -> TraceArrays:
    """The arrays a replay of `trace` (a uvmsim.trace.Trace) runs on, computed once per
    Trace object."""
    cache = trace._cache
    T = cache.get("engine_arrays")
    if T is None or cache.get("engine_arrays_of") is not trace.arrays:
        T = compact(trace.arrays)
        cache["engine_arrays"] = T
        cache["engine_arrays_of"] = trace.arrays
    return T
